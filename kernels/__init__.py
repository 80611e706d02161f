"""Scan kernels for the lab's recurrent models (CPU: Numba, GPU: Triton, reference: torch).

Public API:

* :func:`linear_scan` / :func:`linear_scan_ref` / :func:`linear_scan_pscan`: ``h_t = a_t * h_{t-1} + b_t``.
* :func:`selective_scan` / :func:`selective_scan_ref`: Mamba-1's selective scan (fused discretisation).
* :func:`ssd` / :func:`ssd_ref`: Mamba-2's structured state space duality, chunked, and its sequential recurrence.
* :func:`associative_scan`: a generic log-depth scan for any associative combine over pytrees of tensors.
* :func:`reuse_freed_memory`: let glibc reuse freed large buffers (call once at start-up; big outputs otherwise
  page-fault afresh on every call).

Importing this package imports neither Numba-compiled code nor Triton; both load on first use.
"""

from ._common import reuse_freed_memory
from .associative_scan import associative_scan
from .linear_scan import linear_scan, linear_scan_pscan, linear_scan_ref
from .selective_scan import selective_scan, selective_scan_ref
from .ssd import ssd, ssd_ref

BACKENDS = ("auto", "numba", "triton", "torch")

__all__ = [
    "BACKENDS",
    "associative_scan",
    "linear_scan",
    "linear_scan_pscan",
    "linear_scan_ref",
    "reuse_freed_memory",
    "selective_scan",
    "selective_scan_ref",
    "ssd",
    "ssd_ref",
]
