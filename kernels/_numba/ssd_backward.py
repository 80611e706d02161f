"""Numba CPU kernels for the backward of SSD's chunk stages (:mod:`kernels._numba.ssd`), on the same chunk-padded
contiguous arrays and in the same notation.

Each kernel is the stage's gradient written out (no forward is recomputed, no ``(batch, heads, chunks, q, q)``
tensor formed). Tasks that sum over the heads of a group (``dCB``, ``dB``, ``dC``) run per ``(batch, chunk, group)``
and loop over the group's heads themselves, so every task owns what it writes (no atomics, no partials). The
innermost loops run over ``headdim`` or ``state`` (contiguous); the decays ``exp(cum_i - cum_j)`` are recomputed
where they are used, with ``math.exp`` as in the forward. Per chunk, head (``L_ij = exp(cum_i - cum_j)``,
``M_ij = CB_ij L_ij dt_j`` for ``j <= i``, ``e_i = exp(cum_i)``, ``w_j = exp(cum_{q-1} - cum_j) dt_j``):

* chunk scan ``y_i = sum_j M_ij x_j + e_i st C_i``: with ``G_ij = dy_i . x_j``: ``dx_j = sum_i M_ij dy_i``,
  ``dCB_ij = G_ij L_ij dt_j`` (summed over the group's heads), ``d dt_j = sum_i G_ij CB_ij L_ij``,
  ``d cum_i += sum_j G_ij M_ij``, ``d cum_j -= sum_i G_ij M_ij``; the state term: ``d st = sum_i e_i dy_i C_i^T``,
  ``dC_i = e_i st^T dy_i``, ``d cum_i += e_i C_i . (st^T dy_i)``.
* chunk state ``S = sum_j w_j x_j B_j^T``: with ``u_j = dS B_j``: ``dx_j = w_j u_j``, ``dB_j = w_j dS^T x_j``
  (summed over the heads), ``d w_j = x_j . u_j``, ``d dt_j = d w_j exp(cum_{q-1} - cum_j)``,
  ``d cum_j -= d w_j w_j``, ``d cum_{q-1} += sum_j d w_j w_j``.
* state passing ``h_{c+1} = exp(cum_{c,q-1}) h_c + cs_c``: the adjoint runs backwards over the chunks.
* bmm ``CB_ij = C_i . B_j``: ``dC_i = sum_j dCB_ij B_j``, ``dB_j = sum_i dCB_ij C_i``.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from .common import FAST_FLAGS, chunk_task

__all__ = ["ssd_bmm_backward", "ssd_chunk_scan_backward", "ssd_chunk_state_backward",
           "ssd_state_passing_backward"]

_KERNEL = dict(parallel=True, cache=True, error_model="numpy", fastmath=FAST_FLAGS)


@njit(**_KERNEL)
def ssd_bmm_backward(C, B, dCB, dC, dB):
    """Gradients of ``CB = C B^T`` per chunk and group: ``dC``, ``dB`` ``(batch, nc, q, groups, state)``."""
    n_b, n_c, q, n_g, n_s = B.shape
    for task in prange(n_b * n_c * n_g):
        b, c, g = chunk_task(task, n_c, n_g)
        for j in range(q):
            dB[b, c, j, g, :] = 0
        dcb = dCB[b, c, g]
        for i in range(q):
            ci = C[b, c, i, g]
            dci = dC[b, c, i, g]
            dci[:] = 0
            for j in range(q):
                w = dcb[i, j]
                bj = B[b, c, j, g]
                dbj = dB[b, c, j, g]
                for n in range(n_s):
                    dci[n] += w * bj[n]
                    dbj[n] += w * ci[n]


@njit(**_KERNEL)
def ssd_chunk_state_backward(B, x, dt, cum, dS, dB, dx, ddt, dcum):
    """Gradients of the chunk states ``S`` (``dS``: ``(batch, nc, heads, headdim, state)``): ``dB``, ``dx``
    (chunk-padded), ``ddt``, ``dcum`` ``(batch, heads, nc, q)``."""
    n_b, n_c, q, n_h, n_p = x.shape
    n_g, n_s = B.shape[3], B.shape[4]
    rep = n_h // n_g
    zero = np.zeros(1, dtype=x.dtype)[0]
    for task in prange(n_b * n_c * n_g):
        b, c, g = chunk_task(task, n_c, n_g)
        for j in range(q):
            dB[b, c, j, g, :] = 0
        for hh in range(rep):
            h = g * rep + hh
            ds = dS[b, c, h]
            cumh = cum[b, h, c]
            end = cumh[q - 1]
            s_end = zero
            for j in range(q):
                ej = math.exp(end - cumh[j])
                w = ej * dt[b, h, c, j]
                xj = x[b, c, j, h]
                bj = B[b, c, j, g]
                dxj = dx[b, c, j, h]
                dbj = dB[b, c, j, g]
                dw = zero
                for p in range(n_p):
                    row = ds[p]  # (C-contiguous rows: a strided view's rows would not vectorise)
                    wx = w * xj[p]
                    u = zero
                    for n in range(n_s):
                        u += row[n] * bj[n]
                        dbj[n] += wx * row[n]
                    dxj[p] = w * u
                    dw += xj[p] * u
                ddt[b, h, c, j] = dw * ej
                dcum[b, h, c, j] = -dw * w
                s_end += dw * w
            dcum[b, h, c, q - 1] += s_end


@njit(**_KERNEL)
def ssd_state_passing_backward(states, cum, dstates, dfinal, dcs, dcum, dh0):
    """Gradients of the state passing (``states``: the entering states the forward returned; ``dstates``,
    ``dfinal``: the gradients of its outputs): ``dcs`` (the chunk states), ``dcum`` (only its last column is
    written: the caller zeroes the rest) and ``dh0``."""
    n_b, n_c, n_h, n_p, n_s = states.shape
    q = cum.shape[3]
    zero = np.zeros(1, dtype=states.dtype)[0]
    for task in prange(n_b * n_h):
        b = task // n_h
        h = task % n_h
        adj = dfinal[b, h].copy()
        for c in range(n_c - 1, -1, -1):
            decay = math.exp(cum[b, h, c, q - 1])
            st = states[b, c, h]
            dst = dstates[b, c, h]
            out = dcs[b, c, h]
            dd = zero
            for p in range(n_p):
                for n in range(n_s):
                    a = adj[p, n]
                    out[p, n] = a
                    dd += a * st[p, n]
                    adj[p, n] = a * decay + dst[p, n]
            dcum[b, h, c, q - 1] = dd * decay
        dh0[b, h] = adj


@njit(**_KERNEL)
def ssd_chunk_scan_backward(CB, x, dt, cum, C, states, dy, dCB, dx, ddt, dcum, dC, dstates):
    """Gradients of the chunk scan's output (``dy``, chunk-padded like ``x``): ``dCB``, ``dx``, ``ddt``, ``dcum``,
    ``dC`` and ``dstates`` (the entering states)."""
    n_b, n_c, q, n_h, n_p = x.shape
    n_g, n_s = C.shape[3], C.shape[4]
    rep = n_h // n_g
    zero = np.zeros(1, dtype=x.dtype)[0]
    for task in prange(n_b * n_c * n_g):
        b, c, g = chunk_task(task, n_c, n_g)
        dcb = dCB[b, c, g]
        dcb[:, :] = 0
        for i in range(q):
            dC[b, c, i, g, :] = 0
        cbg = CB[b, c, g]
        tmp = np.empty(n_s, dtype=x.dtype)
        for hh in range(rep):
            h = g * rep + hh
            cumh = cum[b, h, c]
            dth = dt[b, h, c]
            ddth = ddt[b, h, c]
            dcumh = dcum[b, h, c]
            ddth[:] = 0
            dcumh[:] = 0
            for j in range(q):
                dx[b, c, j, h, :] = 0
            st = states[b, c, h]
            dst = dstates[b, c, h]
            dst[:, :] = 0
            for i in range(q):
                dyi = dy[b, c, i, h]
                ci_ = cumh[i]
                cbi = cbg[i]
                dcbi = dcb[i]
                for j in range(i + 1):
                    xj = x[b, c, j, h]
                    gij = zero
                    for p in range(n_p):
                        gij += dyi[p] * xj[p]
                    L = math.exp(ci_ - cumh[j])
                    w = L * dth[j]
                    m = cbi[j] * w
                    t = gij * m
                    dcbi[j] += gij * w
                    ddth[j] += gij * cbi[j] * L
                    dcumh[i] += t
                    dcumh[j] -= t
                    dxj = dx[b, c, j, h]
                    for p in range(n_p):
                        dxj[p] += m * dyi[p]
                e = math.exp(ci_)
                cr = C[b, c, i, g]
                tmp[:] = 0
                for p in range(n_p):
                    a = dyi[p]
                    ea = e * a
                    stp = st[p]
                    dstp = dst[p]
                    for n in range(n_s):
                        tmp[n] += a * stp[n]
                        dstp[n] += ea * cr[n]
                dci = dC[b, c, i, g]
                de = zero
                for n in range(n_s):
                    dci[n] += e * tmp[n]
                    de += cr[n] * tmp[n]
                dcumh[i] += e * de
