"""The ``selective_scan`` part of the scan benchmark: time, the largest single tensor any torch op returns during a
call, and the peak extra resident memory of the Numba kernels and of :func:`kernels.selective_scan_ref`.

The memory figure needs a fresh process: :func:`bench_selective` runs this module as a child,
``python -m lab.bench.scan.selective '[impl, mode, batch, channels, length, state, repeats, malloc_reuse]'``, which
prints one JSON line. Quick runs call :func:`measure` in this process instead (no meaningful memory figure then).
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time

import torch

from .timing import child_env

__all__ = ["bench_selective", "main", "measure"]


def _inputs(bsz, dim, length, state, grad):
    u = torch.randn(bsz, dim, length)
    delta = torch.randn(bsz, dim, length) * 0.5 - 1.0
    A = -torch.rand(dim, state) * 2 - 0.1
    B = torch.randn(bsz, state, length)
    C = torch.randn(bsz, state, length)
    D = torch.randn(dim)
    z = torch.randn(bsz, dim, length)
    xs = [u, delta, A, B, C, D, z]
    for x in xs:
        x.requires_grad_(grad)
    return xs


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


class _Spy(torch.overrides.TorchFunctionMode):
    """Records the size in bytes of the largest tensor any torch function returns while active."""

    def __init__(self):
        super().__init__()
        self.biggest = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else [out]:
            if isinstance(t, torch.Tensor):
                self.biggest = max(self.biggest, t.numel() * t.element_size())
        return out


def measure(impl: str, mode: str, bsz: int, dim: int, length: int, state: int, repeats: int,
            malloc_reuse: bool = False) -> dict:
    """Time ``repeats`` calls of one implementation after warm-up calls (a small one, and for ``numba`` one at the
    measured size), then measure memory.

    Arguments:
        impl: ``"numba"`` (:func:`kernels.selective_scan`) or ``"ref"`` (:func:`kernels.selective_scan_ref`).
        mode: ``"fwd"`` or ``"fwd_bwd"``.
        bsz, dim, length, state: the Mamba-1 sizes.
        repeats: timed calls (fewer once they add up to 20 s).
        malloc_reuse: call :func:`kernels.reuse_freed_memory` first, as the parent benchmark and every entry point
            of the lab do (big outputs then reuse freed buffers instead of page-faulting afresh on every call).

    Returns:
        ``{"times": [s, ...], "fwd_times": [s, ...] (numba fwd_bwd only: a forward without grad timed right before
        each forward+backward, for their ratio), "peak_extra_bytes": rise of the peak RSS during the timed calls,
        "max_tensor_bytes": largest tensor returned by a torch op in one more call}``. Seeds torch's global RNG.
    """
    from kernels import reuse_freed_memory, selective_scan, selective_scan_ref

    if malloc_reuse:
        reuse_freed_memory()
    torch.manual_seed(0)

    def call(xs):
        u, delta, A, B, C, D, z = xs
        if impl == "numba":
            return selective_scan(u, delta, A, B, C, D=D, z=z, delta_softplus=True, backend="numba")
        return selective_scan_ref(u, delta, A, B, C, D=D, z=z, delta_softplus=True)

    grad = mode == "fwd_bwd"
    small = _inputs(1, 64, 256, state, grad)  # warm-up (parallel path too): loads the compiled kernels
    y = call(small)
    if grad:
        y.sum().backward()
    xs = _inputs(bsz, dim, length, state, grad)
    g = torch.randn(bsz, dim, length)
    try:  # reset this process's peak RSS (VmHWM) to its current RSS, then read the peak afterwards
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        peak0 = _status_kib("VmRSS")

        def peak():
            return _status_kib("VmHWM")

    except OSError:  # not Linux: ru_maxrss (which a child inherits from its parent: less reliable)

        def peak():
            return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

        peak0 = peak()
    if impl == "numba":  # one untimed call at this size: the first one (allocator growth, page faults) took
        # ~0.4 s against ~0.07 s for the next; the peak-memory window above still includes it
        with torch.set_grad_enabled(grad):
            y = call(xs)
            if grad:
                y.backward(g)
        del y
        for x in xs:
            x.grad = None
    times, fwd_times = [], []
    for _ in range(repeats):
        if grad and impl == "numba":  # a forward (no grad) right before each forward+backward: their ratio is
            # measured pair by pair, under the same load, not from two processes run seconds apart
            t0 = time.perf_counter()
            with torch.no_grad():
                y = call(xs)
            fwd_times.append(time.perf_counter() - t0)
            del y
        t0 = time.perf_counter()
        with torch.set_grad_enabled(grad):
            y = call(xs)
            if grad:
                y.backward(g)
        times.append(time.perf_counter() - t0)
        del y
        for x in xs:
            x.grad = None
        if sum(times) > 20:
            break
    peak1 = peak()
    spy = _Spy()  # one more (untimed) call with a spy on every tensor torch hands back: the largest allocation
    with torch.set_grad_enabled(grad), spy:
        y = call(xs)
        if grad:
            y.backward(g)
    return {"times": times, "fwd_times": fwd_times, "peak_extra_bytes": (peak1 - peak0) * 1024,
            "max_tensor_bytes": spy.biggest}


def main(argv: list[str] | None = None) -> None:
    """Child side: :func:`measure` with the JSON list of arguments in ``argv[0]``; print the result as JSON."""
    args = json.loads((sys.argv[1:] if argv is None else argv)[0])
    print(json.dumps(measure(*args)))


def bench_selective(impl, mode, sizes, repeats, in_process=False, malloc_reuse=False) -> dict:
    """:func:`measure` in a fresh child process, or here when ``in_process`` (peak memory then NaN);
    ``malloc_reuse``: the child calls :func:`kernels.reuse_freed_memory` first (pass the parent's setting, so that
    every row of one benchmark runs under the same allocator)."""
    args = [impl, mode, *sizes, repeats, bool(malloc_reuse) and not in_process]
    if in_process:  # quick mode: same code, no fresh process, so the peak-memory figure is meaningless
        r = measure(*args)
        r["peak_extra_bytes"] = float("nan")
        return r
    out = subprocess.run(
        [sys.executable, "-m", "lab.bench.scan.selective", json.dumps(args)],
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=1800,
    )
    if out.returncode != 0:
        raise RuntimeError(f"selective_scan benchmark child failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    main()
