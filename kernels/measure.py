"""What the lab's benchmarks (:mod:`lab.bench`) measure the kernels with, as public names.

* :func:`empty_offset`: an uninitialised tensor whose start address differs from others' modulo 4 KiB, so that
  a streaming kernel's inputs and outputs do not share cache sets;
* :func:`numba_threads_for`: the Numba threads the kernels use for a given work size;
* :func:`axpy_rows`: the bandwidth reference, element-wise ``out = a * b + b`` over ``(N, T)`` rows in Numba (the
  scan's access pattern without its dependency);
* :func:`reuse_freed_memory`: glibc keeps freed large blocks for reuse (also :func:`kernels.reuse_freed_memory`).
"""

from kernels._common import empty_offset, numba_threads_for, reuse_freed_memory
from kernels._numba.linear_scan import axpy_rows

__all__ = ["axpy_rows", "empty_offset", "numba_threads_for", "reuse_freed_memory"]
