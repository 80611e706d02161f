"""What a dashboard (and the notebook) calls besides ``run``: the binary counter's trace, chunk by chunk (memo).

:func:`counter_trace` pushes ``n_chunks`` chunks through :class:`kernels.StreamingPrefix` with a combine on chunk
intervals (``[a, b) ∘ [b, c) = [a, c)``, which also checks that every returned prefix covers exactly the chunks
before it) and records after each push: the live states, the bound ``floor(log2 n) + 1``, the cumulative combine
calls and the block sizes on the stack (the binary digits of ``n``, largest first), beside the naive recompute
that keeps every chunk state.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

import kernels
from lab.cache import memo
from lab.checks import check_int

__all__ = ["counter_trace"]


def _join(left: tuple[int, int], right: tuple[int, int]) -> tuple[int, int]:
    if left[1] != right[0]:
        raise AssertionError(f"the counter combined non-adjacent blocks {left} and {right}")
    return (left[0], right[1])


@memo(maxsize=16)
def counter_trace(n_chunks: int) -> xr.Dataset:
    """The binary counter after each of ``n_chunks`` pushes.

    Arguments:
        n_chunks: chunks pushed (an integer in [1, 1000000]).
    Returns:
        Dataset over ``pushed`` (1..n_chunks) and ``slot`` (stack position, bottom first) with ``live`` (states
        held), ``bound`` (``floor(log2 n) + 1``), ``calls`` (cumulative combine calls), ``calls_per_chunk``,
        ``naive_live`` (every chunk state kept: ``n``), ``naive_calls`` (cumulative calls of a recompute of each
        prefix from the kept states, at its cheapest: ``n - 1`` for the ``n``-th chunk) and ``block_size``
        (``(pushed, slot)``, 0 where the stack is shorter).
    """
    check_int("n_chunks", n_chunks, 1, 1_000_000)
    counter = kernels.StreamingPrefix(_join)
    n = np.arange(1, n_chunks + 1)
    live, calls = np.zeros(n_chunks, np.int64), np.zeros(n_chunks, np.int64)
    slots = int(n_chunks).bit_length()
    blocks = np.zeros((n_chunks, slots), np.int64)
    for i in range(n_chunks):
        prefix = counter.push((i, i + 1))
        if (prefix is None) != (i == 0) or (i and prefix != (0, i)):
            raise AssertionError(f"chunk {i} was given the prefix {prefix}, not chunks [0, {i})")
        live[i], calls[i] = counter.live_states, counter.calls
        sizes = [1 << j for j in reversed(range(slots)) if (i + 1) >> j & 1]  # n's binary digits
        if len(sizes) != live[i]:
            raise AssertionError(f"{live[i]} blocks held after {i + 1} chunks; binary digits: {sizes}")
        blocks[i, : len(sizes)] = sizes
    bound = np.floor(np.log2(n)).astype(np.int64) + 1
    return xr.Dataset(
        {
            "live": ("pushed", live, {"long_name": "chunk states held by the binary counter", "units": "states"}),
            "bound": ("pushed", bound, {"long_name": "floor(log2 n) + 1", "units": "states"}),
            "calls": ("pushed", calls, {"long_name": "cumulative aggregator calls", "units": "calls"}),
            "calls_per_chunk": ("pushed", calls / n, {"long_name": "aggregator calls per chunk so far",
                                                      "units": "calls"}),
            "naive_live": ("pushed", n, {"long_name": "states held by the naive recompute", "units": "states"}),
            "naive_calls": ("pushed", np.cumsum(n - 1), {"long_name": "cumulative calls of the naive recompute "
                                                                      "(n - 1 per chunk)", "units": "calls"}),
            "block_size": (("pushed", "slot"), blocks, {"long_name": "chunks in each block on the stack (0: empty)",
                                                        "units": "chunks"}),
        },
        coords={"pushed": n, "slot": np.arange(slots)},
        attrs={"n_chunks": int(n_chunks)},
    )
