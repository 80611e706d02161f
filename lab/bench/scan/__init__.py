"""Scan benchmark (``lab bench scan``): :func:`run_scan_bench` measures everything in one run and returns an
``xarray.Dataset``; :func:`format_scan_bench` prints it as tables with the targets and pass/fail.

What is measured (CPU; all times are medians of repeats with the caches flushed before each repeat by touching a
64 MiB buffer; implementations compared with each other are timed in turns, so that load from other processes on
a shared machine hits them alike):

* ``bandwidth``: element-wise ``out = a * b + b`` in Numba over the same ``(rows, T)`` float32 arrays as the scan,
  1 thread and all threads (``numba.set_num_threads``), output preallocated: the machine's bandwidth for the scan's
  access pattern (12 bytes an element). It is measured once up front (1 thread and all) and again for every
  ``linear_scan`` case on that case's arrays, in the same rounds as the scans (the percentages use the latter).
* ``linear_scan`` per case (layouts and sizes) and implementation, forward and forward+backward:
  ``numba`` is ``linear_scan(..., out=...)`` into a preallocated output (the kernel itself, comparable to the
  bandwidth figure); ``numba_alloc`` is the plain call, which also allocates (page-faults) its output;
  ``torch_loop`` is a Python loop of ``torch.addcmul`` over time in its best layout ``(T, ...)`` (forward+backward
  through autograd); ``pscan`` a Blelloch scan in torch; ``jax`` ``jax.lax.associative_scan`` (when installed).
  GB/s counts 12 bytes an element forward and 32 forward+backward (backward reads ``a, h, g`` and writes
  ``da, db``).
* ``selective_scan`` at Mamba-1 sizes: the Numba kernels vs :func:`kernels.selective_scan_ref`, forward and
  forward+backward; time, the largest single tensor any torch op returns during a call, and the *peak extra
  resident memory* (the rise of the process's peak RSS during the calls, measured in a fresh subprocess after a
  warm-up; torch allocations are invisible to tracemalloc),
  compared with the size of one ``(batch, channels, length, state)`` tensor. The peak is Linux's ``VmHWM``, reset
  through ``/proc/self/clear_refs`` after the warm-up (``ru_maxrss`` would carry the parent's peak into the child).
* ``ssd``: the chunked form (torch stages, and stages 2-5 on Numba, forward and backward) vs the sequential
  recurrence at scaled-down Mamba-2 sizes, forward and forward+backward.
* first-call time of ``linear_scan`` in a fresh process, with Numba's on-disk cache warm and (full run) cold.

Modules: :mod:`.timing` (flushing, round-robin timing), :mod:`.linear`, :mod:`.selective` and :mod:`.first_call`
(both also run as child processes with ``python -m``), :mod:`.ssd`, :mod:`.run` (the driver), :mod:`.report`.
"""

from __future__ import annotations

from .report import format_scan_bench
from .run import run_scan_bench

__all__ = ["format_scan_bench", "run_scan_bench"]
