"""Shared setup for the kernels tests (they import the top-level ``kernels`` package, not ``tests.kernels``)."""

import os
import sys

import pytest
import torch

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if _ROOT not in sys.path:  # run from a checkout without installing the project
    sys.path.insert(0, _ROOT)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
