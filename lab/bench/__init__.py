"""The benchmarks ``lab bench NAME`` runs, in one home: each returns an ``xarray.Dataset`` (saved by the CLI) and
formats it as a table.

==========  ==========================================================================================================
name        what it measures
==========  ==========================================================================================================
``scan``    the scan kernels against torch loops, a log-depth scan, jax and the machine's own memory bandwidth
            (:mod:`lab.bench.scan`)
``pde``     the PDE solvers' trajectory-steps per second against a plain NumPy ETDRK4 (:mod:`lab.bench.pde`)
``layers``  the lab's Mamba, Mamba-2 and LRU blocks against mambapy, forward and training tokens/s
            (:mod:`lab.bench.layers`)
``int8``    SSDi8's INT8 SSD (``torch._int_mm``) and an int8 projection against float32 on this CPU
            (:mod:`lab.bench.int8`)
``gpu``     on a CUDA machine: the compiled Triton kernels against the torch references, then timed
            (:mod:`lab.bench.gpu`)
==========  ==========================================================================================================

Importing this package imports none of them (each loads torch, Numba or the solvers).
"""

from __future__ import annotations

__all__ = ["BENCHES"]

#: benchmark name -> (module, its run function, its format function); run(quick=..., progress=...) -> Dataset
BENCHES = {
    "scan": ("lab.bench.scan", "run_scan_bench", "format_scan_bench"),
    "pde": ("lab.bench.pde", "run_pde_bench", "format_pde_bench"),
    "layers": ("lab.bench.layers", "run_layers_bench", "format_layers_bench"),
    "int8": ("lab.bench.int8", "run_int8_bench", "format_int8_bench"),
    "gpu": ("lab.bench.gpu", "run_gpu_bench", "format_gpu_bench"),
}
