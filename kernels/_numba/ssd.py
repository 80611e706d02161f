"""Numba CPU kernels for SSD's chunk stages (Mamba-2): the group products ``C B^T``, the chunk states, the state
passing across chunks and the chunk scan, on chunk-padded contiguous arrays.

Each kernel loops over ``(batch, chunk, head)`` (or ``(batch, head)`` for the passing) in parallel and keeps one
chunk's working set in cache: the decays ``exp(cumsum_i - cumsum_j)`` are computed where they are used, so the
``(batch, heads, chunks, q, q)`` decay and score tensors of the torch path are never formed. The innermost loops run
over ``headdim`` or ``state`` (contiguous). ``exp`` is ``math.exp`` (exact to the dtype), as the torch path's.

Shapes (``q`` the chunk size, ``nc`` the number of chunks, the length padded to ``nc * q`` with ``dt = 0``):
``x`` ``(batch, nc, q, heads, headdim)``; ``B``, ``C`` ``(batch, nc, q, groups, state)``; ``dt``, ``cum``
``(batch, heads, nc, q)``; ``CB`` ``(batch, nc, groups, q, q)``; states ``(batch, nc, heads, headdim, state)``.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from .common import FAST_FLAGS, chunk_task


@njit(parallel=True, cache=True, error_model="numpy", fastmath=FAST_FLAGS)
def ssd_bmm(C, B, out):
    """``out[b, c, g, i, j] = C[b, c, i, g] . B[b, c, j, g]`` (every i, j of the chunk)."""
    n_b, n_c, q, n_g, n_s = B.shape
    for task in prange(n_b * n_c * n_g):
        b, c, g = chunk_task(task, n_c, n_g)
        for i in range(q):
            ci = C[b, c, i, g]
            row = out[b, c, g, i]
            for j in range(q):
                bj = B[b, c, j, g]
                acc = ci[0] * bj[0]  # (not ci[0] * 0: an integer literal promotes float32 to float64)
                for n in range(1, n_s):
                    acc += ci[n] * bj[n]
                row[j] = acc


@njit(parallel=True, cache=True, error_model="numpy", fastmath=FAST_FLAGS)
def ssd_chunk_state(B, x, dt, cum, out):
    """``out[b, c, h] = sum_j exp(cum[q-1] - cum[j]) dt[j] x[j, h] B[j, g]^T`` (the state a chunk leaves from 0)."""
    n_b, n_c, q, n_h, n_p = x.shape
    n_g, n_s = B.shape[3], B.shape[4]
    rep = n_h // n_g
    for task in prange(n_b * n_c * n_h):
        b = task // (n_c * n_h)
        c = (task // n_h) % n_c
        h = task % n_h
        g = h // rep
        s = out[b, c, h]
        s[:, :] = 0
        end = cum[b, h, c, q - 1]
        for j in range(q):
            w = math.exp(end - cum[b, h, c, j]) * dt[b, h, c, j]
            bj = B[b, c, j, g]
            xj = x[b, c, j, h]
            for p in range(n_p):
                wx = w * xj[p]
                sp = s[p]
                for n in range(n_s):
                    sp[n] += wx * bj[n]


@njit(parallel=True, cache=True, error_model="numpy", fastmath=FAST_FLAGS)
def ssd_state_passing(chunk_states, cum, h0, states, final):
    """``states[b, c]`` = the state entering chunk ``c``; ``h <- exp(cum[c, q-1]) h + chunk_states[c]``."""
    n_b, n_c, n_h, n_p, n_s = chunk_states.shape
    q = cum.shape[3]
    for task in prange(n_b * n_h):
        b = task // n_h
        h = task % n_h
        cur = h0[b, h].copy()
        for c in range(n_c):
            states[b, c, h] = cur
            decay = math.exp(cum[b, h, c, q - 1])
            cs = chunk_states[b, c, h]
            for p in range(n_p):
                for n in range(n_s):
                    cur[p, n] = decay * cur[p, n] + cs[p, n]
        final[b, h] = cur


@njit(parallel=True, cache=True, error_model="numpy", fastmath=FAST_FLAGS)
def ssd_chunk_scan(CB, x, dt, cum, C, states, out):
    """``out[b, c, i, h] = sum_{j <= i} CB[i, j] exp(cum[i] - cum[j]) dt[j] x[j, h] + exp(cum[i]) states[c, h] C[i]``
    (before the D skip and the z gate)."""
    n_b, n_c, q, n_h, n_p = x.shape
    n_g, n_s = C.shape[3], C.shape[4]
    rep = n_h // n_g
    for task in prange(n_b * n_c * n_h):
        b = task // (n_c * n_h)
        c = (task // n_h) % n_c
        h = task % n_h
        g = h // rep
        st = states[b, c, h]
        st_t = np.empty((n_s, n_p), dtype=x.dtype)  # the entering state transposed: the C_i product runs over p
        for p in range(n_p):
            for n in range(n_s):
                st_t[n, p] = st[p, n]
        for i in range(q):
            yi = out[b, c, i, h]
            yi[:] = 0
            ci_ = cum[b, h, c, i]
            cbi = CB[b, c, g, i]
            for j in range(i + 1):
                w = cbi[j] * math.exp(ci_ - cum[b, h, c, j]) * dt[b, h, c, j]
                xj = x[b, c, j, h]
                for p in range(n_p):
                    yi[p] += w * xj[p]
            e = math.exp(ci_)
            crow = C[b, c, i, g]
            for n in range(n_s):
                w = e * crow[n]
                sn = st_t[n]
                for p in range(n_p):
                    yi[p] += w * sn[p]
