"""The paper's model: a prefix-scannable model (chunk encoder, aggregator over chunk states, inference per chunk).

It lives in :mod:`lab.core.psm` (its equations, its two aggregators, its parallel and streaming forms), because the
arena (:mod:`lab.core.zoo`) compares it with every other architecture of the lab; this method imports it from there.
"""

from __future__ import annotations

from lab.core.psm import AGGREGATORS, BRACKETINGS, PSM, StreamStats

__all__ = ["AGGREGATORS", "BRACKETINGS", "PSM", "StreamStats"]
