"""The INT8 SSD's Numba kernels (SSDi8's ``backend="int"``): int8 codes, int32 sums, the float tail fused.

The public name of :mod:`kernels._numba.ssd_int8` for the code outside ``kernels``: importing this module compiles
nothing and loads Numba only here (importing :mod:`kernels` itself never does).
"""

from __future__ import annotations

from ._numba.ssd_int8 import int8_cb_codes, int8_chunk_scan, int8_chunk_states, int8_state_passing

__all__ = ["int8_cb_codes", "int8_chunk_scan", "int8_chunk_states", "int8_state_passing"]
