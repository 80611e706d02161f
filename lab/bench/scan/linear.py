"""The ``linear_scan`` part of the scan benchmark: the machine's bandwidth for the scan's access pattern and each
implementation (Numba with and without a preallocated output, a torch loop, a log-depth torch scan, JAX) timed in
turns, forward and forward+backward."""

from __future__ import annotations

from importlib.util import find_spec

import numpy as np
import torch

from .timing import time_calls, time_round_robin

__all__ = ["LS_IMPLS", "MODES", "bandwidth", "bench_linear", "jax_scan", "linear_cases"]

LS_IMPLS = ("numba", "numba_alloc", "torch_loop", "pscan", "jax")
MODES = ("fwd", "fwd_bwd")


def bandwidth(rows: int, t: int, flush, repeats: int) -> dict[str, float]:
    """GB/s of the Numba ``out = a * b + b`` over ``(rows, t)`` float32 arrays (12 bytes an element), with 1 thread
    (key ``"1"``) and all Numba threads (``"all"``)."""
    import numba

    from kernels.measure import axpy_rows, empty_offset

    a = torch.rand(rows, t)
    b = torch.randn(rows, t)
    out = empty_offset((rows, t), torch.float32, "cpu", avoid=(a, b))
    an, bn, on = a.numpy(), b.numpy(), out.numpy()
    axpy_rows(an, bn, on)
    res = {}
    n_all = numba.config.NUMBA_NUM_THREADS
    for label, n in (("1", 1), ("all", n_all)):
        numba.set_num_threads(n)
        ts = time_calls(lambda: axpy_rows(an, bn, on), flush, repeats)
        res[label] = 12 * a.numel() / float(np.median(ts)) / 1e9
    numba.set_num_threads(n_all)
    return res


def jax_scan():
    """A jitted ``jax.lax.associative_scan`` of the linear recurrence over the last axis, or None without JAX."""
    if find_spec("jax") is None:
        return None
    import jax
    import jax.numpy as jnp

    def combine(left, right):
        return left[0] * right[0], right[0] * left[1] + right[1]

    @jax.jit
    def scan(a, b):
        return jax.lax.associative_scan(combine, (a, b), axis=-1)[1]

    def run(a, b):
        return scan(jnp.asarray(a.numpy()), jnp.asarray(b.numpy())).block_until_ready()

    return run


def linear_cases(quick: bool) -> list[tuple[str, tuple[int, int, int], int]]:
    """The benchmark's ``(name, shape, time dim)`` cases; ``quick`` shrinks every shape."""
    if quick:
        return [
            ("time_contiguous", (4, 32, 512), -1),
            ("channels_last", (4, 512, 32), 1),
            ("long", (1, 8, 2048), -1),
            ("short", (32, 16, 64), -1),
        ]
    return [
        ("time_contiguous", (16, 256, 4096), -1),
        ("channels_last", (16, 4096, 256), 1),
        ("long", (2, 64, 65536), -1),
        ("short", (256, 64, 256), -1),
    ]


def bench_linear(shape, dim, flush, repeats, jax_run, budget):
    """Time every implementation on one case in turns.

    Returns:
        ``({(impl, mode): [seconds, ...]}, bandwidth GB/s of out=a*b+b on this case's arrays in the same rounds)``.
    """
    from kernels.linear_scan import linear_scan, linear_scan_pscan, linear_scan_ref
    from kernels.measure import axpy_rows, empty_offset, numba_threads_for

    a = torch.rand(shape) * 0.5 + 0.5
    b = torch.randn(shape)
    g = torch.randn(shape)
    out = empty_offset(b.shape, b.dtype, "cpu", avoid=(a, b))  # placed as linear_scan places its own outputs
    a_t = a.movedim(dim, 0).contiguous()  # the torch loop's best layout: time first
    b_t = b.movedim(dim, 0).contiguous()
    g_t = g.movedim(dim, 0).contiguous()
    rows = (-1, shape[-1])
    an, bn, on = a.view(rows).numpy(), b.view(rows).numpy(), out.view(rows).numpy()

    def _axpy(x, y, o):
        with numba_threads_for(x.size):  # as many threads as linear_scan itself uses for this size
            axpy_rows(x, y, o)

    def loop_fwd():
        o = torch.empty_like(b_t)
        h = torch.zeros_like(b_t[0])
        for t in range(b_t.shape[0]):
            h = torch.addcmul(b_t[t], a_t[t], h, out=o[t])
        return o

    fwd = {
        "axpy": lambda: _axpy(an, bn, on),  # this case's bandwidth reference, measured in the same rounds
        "numba": lambda: linear_scan(a, b, dim=dim, backend="numba", out=out),
        "numba_alloc": lambda: linear_scan(a, b, dim=dim, backend="numba"),
        "torch_loop": loop_fwd,
        "pscan": lambda: linear_scan_pscan(a, b, dim=dim),
    }
    if jax_run is not None:
        a_j, b_j = a.movedim(dim, -1).contiguous(), b.movedim(dim, -1).contiguous()
        fwd["jax"] = lambda: jax_run(a_j, b_j)
    with torch.no_grad():
        t_fwd = time_round_robin(
            fwd,
            flush,
            repeats,
            budget,
            warm=("axpy", "numba", "numba_alloc", "jax") if jax_run else ("axpy", "numba", "numba_alloc"),
        )

    def fwd_bwd(fn, x_a, x_b, x_g):
        def run():
            ar = x_a.detach().requires_grad_()
            br = x_b.detach().requires_grad_()
            fn(ar, br).backward(x_g)

        return run

    t_fb = time_round_robin(
        {
            "numba_alloc": fwd_bwd(lambda x, y: linear_scan(x, y, dim=dim, backend="numba"), a, b, g),
            "torch_loop": fwd_bwd(lambda x, y: linear_scan_ref(x, y, dim=0), a_t, b_t, g_t),
            "pscan": fwd_bwd(lambda x, y: linear_scan_pscan(x, y, dim=dim), a, b, g),
        },
        flush,
        repeats,
        budget,
        warm=("numba_alloc",),
    )
    res = {(k, "fwd"): v for k, v in t_fwd.items() if k != "axpy"}
    res.update({(k, "fwd_bwd"): v for k, v in t_fb.items()})
    bw = 12 * a.numel() / float(np.median(t_fwd["axpy"])) / 1e9
    return res, bw
