"""Scan kernels for the lab's recurrent models (CPU: Numba, GPU: Triton, reference: torch).

Public API:

* :func:`linear_scan` / :func:`linear_scan_ref` / :func:`linear_scan_pscan`: ``h_t = a_t * h_{t-1} + b_t``.
* :func:`selective_scan` / :func:`selective_scan_ref`: Mamba-1's selective scan (fused discretisation).
* :func:`ssd` / :func:`ssd_ref`: Mamba-2's structured state space duality, chunked, and its sequential recurrence.
* :func:`causal_conv1d` / :func:`causal_conv1d_ref`: Mamba's depthwise causal convolution with a fused SiLU.
* :func:`associative_scan`: a generic log-depth scan for any associative combine over pytrees of tensors.
* :func:`delta_rule` / :func:`delta_rule_ref` / :func:`delta_rule_step`: the gated delta rule with several
  Householder substeps per token (DeltaNet, Gated DeltaNet, DeltaProduct), chunked (WY form) or recurrent.
* :func:`prefix_scan` / :class:`StreamingPrefix`: prefix states under a combine that need not be associative, with
  one power-of-two bracketing, parallel or one chunk at a time in O(log n) live states (:func:`prefix_scan_stacked`:
  a batch of sequences, a few tensor calls per tree level);
  :func:`saturating_scan`: an int8 (fixed-width) saturating linear scan.
* Step forms for decoding: :func:`linear_scan_step`, :func:`selective_state_update` (Mamba-1 and the Mamba-2 head
  form, in place, as state-spaces/mamba), :func:`ssd_step`.
* :func:`reuse_freed_memory`: let glibc reuse freed large buffers (call once at start-up; big outputs otherwise
  page-fault afresh on every call).

Importing this package imports neither Numba-compiled code nor Triton; both load on first use.
"""

from ._common import reuse_freed_memory
from .associative_scan import associative_scan
from .causal_conv import causal_conv1d, causal_conv1d_ref
from .delta_rule import delta_rule, delta_rule_ref, delta_rule_step
from .linear_scan import linear_scan, linear_scan_pscan, linear_scan_ref
from .prefix_scan import StreamingPrefix, prefix_scan, prefix_scan_stacked, saturating_scan, saturating_scan_ref
from .selective_scan import selective_scan, selective_scan_ref
from .ssd import ssd, ssd_ref
from .step import linear_scan_step, selective_state_update, ssd_step

BACKENDS = ("auto", "numba", "triton", "torch")

__all__ = [
    "BACKENDS",
    "StreamingPrefix",
    "associative_scan",
    "causal_conv1d",
    "causal_conv1d_ref",
    "delta_rule",
    "delta_rule_ref",
    "delta_rule_step",
    "linear_scan",
    "linear_scan_pscan",
    "linear_scan_ref",
    "linear_scan_step",
    "prefix_scan",
    "prefix_scan_stacked",
    "reuse_freed_memory",
    "saturating_scan",
    "saturating_scan_ref",
    "selective_scan",
    "selective_scan_ref",
    "selective_state_update",
    "ssd",
    "ssd_ref",
    "ssd_step",
]
