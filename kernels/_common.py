"""Shared helpers: input checks, backend names, and output allocation that avoids cache-set aliasing."""

from __future__ import annotations

import math
import os

import torch

BACKENDS = ("auto", "numba", "triton", "torch")
REAL_DTYPES = (torch.float32, torch.float64)
#: accepted by every op and computed in float32 (the result comes back in the input's dtype)
HALF_DTYPES = (torch.float16, torch.bfloat16)
SCAN_DTYPES = (torch.float32, torch.float64, torch.complex64, torch.complex128)

# Outputs at least this big are placed so that their address modulo 4 KiB differs from the inputs' (see
# :func:`empty_offset`).
_OFFSET_MIN_BYTES = 1 << 20


# Below this much work (elements times a per-element cost), a Numba call runs on one thread: waking the worker
# threads costs more than it saves, and on a busy machine a worker can wait a whole scheduler tick (4 ms).
_PARALLEL_MIN_WORK = 1 << 18


class numba_threads_for:
    """Context manager: run the enclosed Numba calls on one thread when ``work`` is small."""

    def __init__(self, work: int):
        self.work = work
        self.saved = None

    def __enter__(self):
        if self.work < _PARALLEL_MIN_WORK:
            import numba

            self.saved = numba.get_num_threads()
            if self.saved != 1:
                numba.set_num_threads(1)
            else:
                self.saved = None
        return self

    def __exit__(self, *exc):
        if self.saved is not None:
            import numba

            numba.set_num_threads(self.saved)
        return False


def check_backend(backend: str) -> str:
    """Return ``backend`` if it is one of :data:`BACKENDS`, else raise ``ValueError`` listing the allowed names."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; allowed: {', '.join(BACKENDS)}")
    return backend


def resolve_backend(backend: str, *tensors: torch.Tensor | None) -> str:
    """Map ``"auto"`` to ``"triton"`` for CUDA tensors (``"torch"`` if triton is missing) and ``"numba"``
    otherwise; check an explicit choice.

    ``"triton"`` on CPU tensors is only allowed under ``TRITON_INTERPRET=1`` (the Triton interpreter); ``"numba"``
    needs CPU tensors.
    """
    check_backend(backend)
    on_cuda = any(t is not None and t.is_cuda for t in tensors)
    if backend == "auto":
        if on_cuda:
            from importlib.util import find_spec

            return "triton" if find_spec("triton") is not None else "torch"
        return "numba"
    if backend == "numba" and on_cuda:
        raise ValueError("backend 'numba' runs on CPU tensors only; got CUDA tensors (use 'triton' or 'torch')")
    if backend == "triton" and not on_cuda and os.environ.get("TRITON_INTERPRET", "0") != "1":
        raise RuntimeError(
            "backend 'triton' needs CUDA tensors; on CPU tensors it only runs under the Triton interpreter "
            "(set TRITON_INTERPRET=1 before triton is imported), or use backend 'numba' or 'torch'"
        )
    return backend


def check_tensor(name: str, x, dtypes=SCAN_DTYPES) -> torch.Tensor:
    """Raise ``TypeError`` unless ``x`` is a tensor with one of ``dtypes``."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dtype not in dtypes:
        allowed = ", ".join(str(d).replace("torch.", "") for d in dtypes)
        raise TypeError(f"{name} has unsupported dtype {str(x.dtype).replace('torch.', '')}; supported: {allowed}")
    return x


def check_same(ref_name: str, ref: torch.Tensor, name: str, x: torch.Tensor, shape=None) -> None:
    """Check that ``x`` has ``ref``'s dtype and device, and the shape ``shape`` (ValueError/TypeError name both)."""
    if x.device != ref.device:
        raise ValueError(
            f"{name} is on {x.device} but {ref_name} is on {ref.device} "
            f"({name} shape {tuple(x.shape)}, {ref_name} shape {tuple(ref.shape)})"
        )
    if x.dtype != ref.dtype:
        raise TypeError(f"{name} has dtype {x.dtype} but {ref_name} has dtype {ref.dtype}; they must match")
    if shape is not None and tuple(x.shape) != tuple(shape):
        raise ValueError(
            f"{name} has shape {tuple(x.shape)} but {tuple(shape)} is required "
            f"(from {ref_name} with shape {tuple(ref.shape)})"
        )


def empty_offset(shape, dtype: torch.dtype, device, avoid=()) -> torch.Tensor:
    """A contiguous uninitialised tensor whose start address differs from those of ``avoid`` modulo 4 KiB.

    Large tensors from the system allocator all start at the same offset inside a page. A kernel that streams
    several of them in lockstep then hits the same L1 cache set with every stream at once; on the AMD EPYC machines
    of this lab the linear scan's backward ran 3x slower for it (the L1 way predictor's tags alias). Placing each
    output at a distinct offset modulo 4 KiB (a few hundred wasted bytes) removes the collision.

    (Backing outputs with transparent huge pages via ``madvise`` was tried too: 3x faster first touch on a fresh
    machine, 5x slower once memory was fragmented, as the kernel compacts memory on the fault. Not used.)
    """
    shape = tuple(int(s) for s in shape)
    numel = math.prod(shape)
    itemsize = torch.empty((), dtype=dtype).element_size()
    if device is None or torch.device(device).type != "cpu" or numel * itemsize < _OFFSET_MIN_BYTES:
        return torch.empty(shape, dtype=dtype, device=device)
    flat = torch.empty(numel + 4096 // itemsize, dtype=dtype, device=device)
    base = flat.data_ptr()
    taken = [t.data_ptr() % 4096 for t in avoid if t is not None and t.numel() > 0]
    best, best_gap = 0, -1
    for shift in range(0, 4096, 256):  # candidate offsets in bytes, 256-byte aligned
        addr = (base + shift) % 4096
        gap = min((min((addr - o) % 4096, (o - addr) % 4096) for o in taken), default=4096)
        if gap > best_gap:
            best, best_gap = shift, gap
    start = best // itemsize
    return flat[start : start + numel].view(shape)


def reuse_freed_memory(threshold_bytes: int = 1 << 30) -> bool:
    """Make glibc's ``malloc`` keep freed large blocks for reuse instead of returning them to the OS; process-wide.

    By default every allocation above ~32 MiB is a fresh ``mmap``, so each new big tensor page-faults all its memory
    again on first touch: on this lab's machines that cost 20-70 ms per 64 MiB output, more than the scan itself,
    and tripled the time of a linear_scan forward+backward at (16, 256, 4096). Raising ``M_MMAP_THRESHOLD`` and
    ``M_TRIM_THRESHOLD`` (the same as ``MALLOC_MMAP_THRESHOLD_``/``MALLOC_TRIM_THRESHOLD_`` in the environment) lets
    a training loop reuse its freed buffers; the price is that the process keeps its peak heap. Call it once at
    start-up (the CLI and the scan benchmark do). Not called on import.

    Arguments:
        threshold_bytes: allocations below this size come from the reusable heap.

    Returns:
        True if glibc accepted the settings, False elsewhere (other C libraries, macOS, Windows).
    """
    import ctypes
    import sys

    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    m_trim_threshold, m_mmap_threshold = -1, -3
    ok = mallopt(m_mmap_threshold, int(min(threshold_bytes, 2**31 - 1)))
    ok &= mallopt(m_trim_threshold, 2**31 - 1)
    return bool(ok)


def shape_without(shape, dim: int) -> tuple[int, ...]:
    """``shape`` with axis ``dim`` removed."""
    shape = list(shape)
    del shape[dim]
    return tuple(shape)


def upcast_half(*tensors):
    """The tensors with float16/bfloat16 ones cast to float32 (None stays None)."""
    return tuple(t.float() if t is not None and t.dtype in HALF_DTYPES else t for t in tensors)
