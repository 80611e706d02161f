"""The ``ssd`` part of the scan benchmark: the chunked form (torch stages, and stages 2-5 on Numba) vs the sequential
recurrence (Mamba-2 sizes)."""

from __future__ import annotations

import torch

from .timing import time_round_robin

__all__ = ["bench_ssd"]


def bench_ssd(sizes, chunk, flush, repeats, budget) -> dict[tuple[str, str], list[float]]:
    """Time :func:`kernels.ssd` (``"chunked"``: torch stages; ``"chunked_numba"``: ``backend="numba"``) and
    :func:`kernels.ssd_ref` (``"sequential"``) in turns.

    Arguments:
        sizes: ``(batch, length, heads, headdim, state)``.
        chunk: the chunk length of the chunked form.

    Returns:
        ``{(impl, mode): [seconds, ...]}`` with mode ``"fwd"`` or ``"fwd_bwd"``. Seeds torch's global RNG.
    """
    from kernels.ssd import ssd, ssd_ref

    bsz, length, heads, headdim, state = sizes
    torch.manual_seed(0)
    x = torch.randn(bsz, length, heads, headdim)
    dt = torch.rand(bsz, length, heads) * 0.1
    A = -torch.rand(heads) - 0.5
    B = torch.randn(bsz, length, 1, state)
    C = torch.randn(bsz, length, 1, state)
    with torch.no_grad():
        t_fwd = time_round_robin(
            {"chunked": lambda: ssd(x, dt, A, B, C, chunk, backend="torch"),
             "chunked_numba": lambda: ssd(x, dt, A, B, C, chunk, backend="numba"),
             "sequential": lambda: ssd_ref(x, dt, A, B, C)},
            flush,
            repeats,
            budget,
            warm=("chunked", "chunked_numba"),
        )

    def fb(fn):
        def run():
            xs = [t.detach().requires_grad_() for t in (x, dt, A, B, C)]
            fn(*xs).sum().backward()

        return run

    t_fb = time_round_robin(
        {"chunked": fb(lambda *xs: ssd(*xs, chunk, backend="torch")),
         "chunked_numba": fb(lambda *xs: ssd(*xs, chunk, backend="numba")), "sequential": fb(ssd_ref)},
        flush, repeats, budget,
        warm=("chunked", "chunked_numba"),  # the backward's Numba stages compile (or load) at their first call
    )
    res = {(k, "fwd"): v for k, v in t_fwd.items()}
    res.update({(k, "fwd_bwd"): v for k, v in t_fb.items()})
    return res
