"""The Numba helpers other packages may build their own kernels on (public names over :mod:`kernels._numba.common`):
:data:`FAST_FLAGS`, the fastmath flags of the lab's float32 kernels, and :func:`fast_sigmoid`, a float32 sigmoid
from bits and a short polynomial. Importing this module imports Numba."""

from ._numba.common import FAST_FLAGS, fast_sigmoid

__all__ = ["FAST_FLAGS", "fast_sigmoid"]
