"""Numba CPU kernels for the depthwise causal 1-D convolution of Mamba's blocks (width 4), with an optional SiLU.

One task per (batch, channel) row and one pass over it: the four taps stay in registers and each output is
``bias + w0 x[t-3] + w1 x[t-2] + w2 x[t-1] + w3 x[t]`` (a pass per tap, accumulating into the output row, took twice
as long). Narrower convolutions arrive padded with zero taps on the left (the wrapper does that). The backward
recomputes the pre-activation in its first pass (nothing but the input is saved), keeps the pre-activation's
gradient ``g`` in a row buffer, and in a second pass gets the input gradient ``dx[i] = sum_k w_k g[i + 3 - k]`` and
the four taps' gradients together; the taps' and the bias gradients are per-batch partials the caller sums.

The input arrives as a C-contiguous ``(rows, length)`` array with the row of (batch ``b``, channel ``c``) at
``b * pitch + c``: a channel slice of a contiguous tensor (the Mamba block passes one of its in-projection) is read
in place that way, and with a compile-time unit stride the loops vectorise (a strided 3-D view took 1.6x longer).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .common import FAST_FLAGS, STEP, fast_sigmoid

WIDTH = 4  # the kernels' convolution width (narrower ones are padded with zero taps)


@njit(cache=True, error_model="numpy", fastmath=FAST_FLAGS, inline="always")
def _at(xr, pr, i):
    """Element ``i`` of the row ``xr`` after the 3-element prefix ``pr`` (``i`` from -3)."""
    return xr[i] if i >= 0 else pr[3 + i]


@njit(**STEP)
def _conv_row(xr, yr, w0, w1, w2, w3, bc, silu):
    """``yr[t] = bc + w0 x[t-3] + w1 x[t-2] + w2 x[t-1] + w3 x[t]`` for ``t >= 3``, through SiLU if ``silu``.

    A helper with ``noalias`` arguments (see ``common.NoAliasCompiler``): inside the parallel kernel the
    same loop ran 2-3x slower on AVX2. Every access indexes a shifted view by the bare loop variable: numba wraps
    negative indices, and for ``x[t - 3]`` it could not tell ``t - 3 >= 0``, so each element went through a
    select and the vector loads were assembled lane by lane (2-4x slower, Zen 3).
    """
    n = xr.shape[0] - 3
    if n <= 0:
        return
    x0, x1, x2, x3, y3 = xr[:n], xr[1:n + 1], xr[2:n + 2], xr[3:], yr[3:]
    if silu:
        for i in range(n):
            s = bc + w0 * x0[i] + w1 * x1[i] + w2 * x2[i] + w3 * x3[i]
            y3[i] = s * fast_sigmoid(s)
    else:
        for i in range(n):
            y3[i] = bc + w0 * x0[i] + w1 * x1[i] + w2 * x2[i] + w3 * x3[i]


@njit(**STEP)
def _conv_grad_row(xr, gr, g, w0, w1, w2, w3, bc):
    """``g[t] = gy[t] silu'(s_t)`` for ``t >= 3``, the pre-activation ``s_t`` recomputed from the row (shifted views,
    as in :func:`_conv_row`)."""
    n = xr.shape[0] - 3
    if n <= 0:
        return
    x0, x1, x2, x3, g3, gr3 = xr[:n], xr[1:n + 1], xr[2:n + 2], xr[3:], g[3:n + 3], gr[3:]
    for i in range(n):
        s = bc + w0 * x0[i] + w1 * x1[i] + w2 * x2[i] + w3 * x3[i]
        sg = fast_sigmoid(s)
        g3[i] = gr3[i] * (sg + s * sg - s * sg * sg)  # silu'(s) = sg (1 + s (1 - sg))


@njit(**STEP)
def _conv_taps_row(xr, g, dxr, w0, w1, w2, w3, zero):
    """The row's input gradient ``dx[t] = w3 g[t] + w2 g[t+1] + w1 g[t+2] + w0 g[t+3]`` (``g`` has 3 zeros past
    the end), and its tap sums: ``sum_t g[t] x[t-3+k]`` for taps 0-2 over ``t >= 3``, tap 3 and the bias over all
    ``t``; returns ``(a0, a1, a2, a3, ab)``. Shifted views, as in :func:`_conv_row`."""
    a0, a1, a2, a3, ab = zero, zero, zero, zero, zero
    n = xr.shape[0]
    if n > 3:
        g3, x0, x1, x2 = g[3:n], xr[:n - 3], xr[1:n - 2], xr[2:n - 1]
        for i in range(n - 3):
            gt = g3[i]
            a0 += gt * x0[i]
            a1 += gt * x1[i]
            a2 += gt * x2[i]
    g1, g2, g3 = g[1:n + 1], g[2:n + 2], g[3:n + 3]
    for t in range(n):
        gt = g[t]
        a3 += gt * xr[t]
        ab += gt
        dxr[t] = w3 * gt + w2 * g1[t] + w1 * g2[t] + w0 * g3[t]
    return a0, a1, a2, a3, ab


@njit(parallel=True, cache=True, error_model="numpy", fastmath=FAST_FLAGS)
def conv_forward(x, pitch, w, bias, prefix, y, silu):
    """Causal depthwise convolution of every row.

    Arguments:
        x: ``(rows, length)`` input, row ``b * pitch + c`` for (batch ``b``, channel ``c``).
        pitch: rows per batch element in ``x``.
        w: ``(channels, 4)`` taps; bias: ``(channels,)``.
        prefix: ``(batch, channels, 3)`` inputs before ``x`` (zeros for a fresh sequence).
        y: ``(batch, channels, length)`` output, written in place: the convolution, through SiLU if ``silu``.
    """
    n_b, n_c, n_l = y.shape
    for task in prange(n_b * n_c):
        b = task // n_c
        c = task % n_c
        xr = x[b * pitch + c]
        pr = prefix[b, c]
        yr = y[b, c]
        w0, w1, w2, w3, bc = w[c, 0], w[c, 1], w[c, 2], w[c, 3], bias[c]
        head = min(3, n_l)
        for t in range(head):
            s = bc + w0 * _at(xr, pr, t - 3) + w1 * _at(xr, pr, t - 2) + w2 * _at(xr, pr, t - 1) + w3 * xr[t]
            yr[t] = s * fast_sigmoid(s) if silu else s
        _conv_row(xr, yr, w0, w1, w2, w3, bc, silu)


@njit(parallel=True, cache=True, error_model="numpy", fastmath=FAST_FLAGS)
def conv_backward(x, pitch, w, bias, prefix, gy, silu, dx, dw_part, db_part, dprefix):
    """Backward of :func:`conv_forward` (same inputs; ``gy`` is the ``(batch, channels, length)`` gradient of ``y``).

    Arguments:
        dx: ``(batch, channels, length)``, written in place.
        dw_part: ``(batch, channels, 4)`` and db_part: ``(batch, channels)``: per-batch partials of the taps' and
            the bias gradients (the caller sums axis 0).
        dprefix: ``(batch, channels, 3)`` gradient of the prefix, written in place.
    """
    n_b, n_c, n_l = gy.shape
    zero = np.zeros(1, dtype=x.dtype)[0]  # (g[0] * 0 would be float64 for float32 input: numba promotes the literal)
    for task in prange(n_b * n_c):
        b = task // n_c
        c = task % n_c
        xr = x[b * pitch + c]
        pr = prefix[b, c]
        gr = gy[b, c]
        dxr = dx[b, c]
        w0, w1, w2, w3, bc = w[c, 0], w[c, 1], w[c, 2], w[c, 3], bias[c]
        g = np.zeros(n_l + 3, dtype=x.dtype)  # the pre-activation's gradient, 3 zeros past the end
        head = min(3, n_l)
        if silu:  # recompute the pre-activation s; g = gy * silu'(s)
            for t in range(head):
                s = bc + w0 * _at(xr, pr, t - 3) + w1 * _at(xr, pr, t - 2) + w2 * _at(xr, pr, t - 1) + w3 * xr[t]
                sg = fast_sigmoid(s)
                g[t] = gr[t] * (sg + s * sg - s * sg * sg)  # silu'(s) = sg (1 + s (1 - sg))
            _conv_grad_row(xr, gr, g, w0, w1, w2, w3, bc)
        else:
            for t in range(n_l):
                g[t] = gr[t]
        a0, a1, a2, a3, ab = _conv_taps_row(xr, g, dxr, w0, w1, w2, w3, zero)
        for t in range(head):  # taps that reach into the prefix
            gt = g[t]
            a0 += gt * _at(xr, pr, t - 3)
            a1 += gt * _at(xr, pr, t - 2)
            a2 += gt * _at(xr, pr, t - 1)
        dw_part[b, c, 0] = a0
        dw_part[b, c, 1] = a1
        dw_part[b, c, 2] = a2
        dw_part[b, c, 3] = a3
        db_part[b, c] = ab
        dpr = dprefix[b, c]  # prefix element 3 + i (i = -3..-1) feeds outputs t = i + 3 - k
        dpr[0] = w0 * g[0]
        dpr[1] = w0 * g[1] + w1 * g[0]
        dpr[2] = w0 * g[2] + w1 * g[1] + w2 * g[0]
