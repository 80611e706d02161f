"""SSDi8's INT8 path through Mamba-2's SSD, the baselines it is compared with, and a trained Mamba-2 language model
run through any of them (with W8A8 / W4A8 projections, injected outlier channels and the error correction).

The SSD stages (:mod:`kernels.ssd`) with SSDi8's quantisation points, per chunk of ``q`` positions::

    dt, cumA          = chunk_cumsum(dt, A)                          float (dt and every exponential stay float)
    Q(x), Q(B), Q(C)                                                 x per (chunk, head, headdim); B, C per group
    CB                = Q(C) Q(B)ᵀ              int8 x int8 -> int32, then requantised with its own scale
    S_c'              = Q(Q(x · dt · e^(cumA_end - cumA))ᵀ Q(B))     int8 x int8 -> int32 -> int8 chunk states
    S_{c+1}           = (S_c · g_c + 2^(k-1)) >> k  + S_c'           int32, gate g_c = ⌊decay · 2^k⌉ (int8 code)
    Q(S_c)            = clamp(S_c, -127, 127)                        the states entering each chunk, int8
    y_off             = e^(cumA) ⊙ Q(C) Q(S)ᵀ   int8 x int8 -> int32, states per (head, headdim)
    y_diag            = (Q(CB) ⊙ L ⊙ dt) Q(x)   float, on the INT8 codes (the decays do not factor out stably)
    y                 = y_diag + y_off + D Q(x) + c                  c: the scaled per-channel correction

Variants (:data:`VARIANTS`): ``fp32`` (the kernel); ``input_only`` (Quamba-style: x, B and C quantised per tensor at
the SSD's entry through :func:`kernels.ssd`'s hooks, the rest float); ``input_group`` (Quamba2-style: the same with x
per (head, headdim) channel and B, C per group: the strongest input-only baseline); ``per_tensor`` (the INT8 path
above with one scale per tensor); ``axis_aware`` (SSDi8's scales, no correction); ``ssdi8`` (with the correction);
``shuffled`` (the correction's values assigned to the wrong channels: the control of the correction claim).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from einops import rearrange

import kernels
from kernels.ssd import ssd_bmm, ssd_chunk_cumsum, ssd_chunk_state, ssd_state_passing
from lab.methods.ssdi8.quant import amax, dequantize, fake_quant, qmatmul, quantize, scale_of

__all__ = ["INPUT_ONLY", "PER_TENSOR_PARTS", "VARIANTS", "SSDScales", "chunked", "observe", "outlier_vector",
           "quant_state_passing", "ssd_int8", "ssd_variant"]

VARIANTS = ("fp32", "input_only", "input_group", "per_tensor", "axis_aware", "ssdi8", "shuffled")
#: the input-only quantisers (prior work): the SSD's inputs quantised once, everything after them in float
INPUT_ONLY = ("input_only", "input_group")


# --------------------------------------------------------------------------------------------------------------------
# Scales and calibration
# --------------------------------------------------------------------------------------------------------------------
@dataclass
class SSDScales:
    """Static INT8 scales of one layer's SSD path.

    Attributes:
        x: ``(chunks, heads, headdim)`` the SSD input. xs: ``(chunks, heads, headdim)`` the input scaled by ``dt``
            and the decay to its chunk's end (what enters the chunk states).
        B, C, CB: ``(groups,)``. states: ``(heads, headdim)`` the states entering each chunk.
    """

    x: torch.Tensor
    xs: torch.Tensor
    B: torch.Tensor
    C: torch.Tensor
    CB: torch.Tensor
    states: torch.Tensor

    @classmethod
    def from_amax(cls, a: dict[str, torch.Tensor]) -> SSDScales:
        return cls(**{k: scale_of(a[k]) for k in ("x", "xs", "B", "C", "CB", "states")})

    def per_tensor(self, only: tuple[str, ...] | None = None) -> SSDScales:
        """The same shapes, each filled with its largest value: one scale per tensor (only for the fields
        ``only``, the others kept, when given)."""
        return SSDScales(**{k: torch.full_like(v, float(v.max())) if only is None or k in only else v
                            for k, v in vars(self).items()})


#: the parts of the INT8 SSD whose scales :func:`experiment.run` sets per tensor one at a time (inside SSDi8)
PER_TENSOR_PARTS = {"B_C": ("B", "C"), "x": ("x", "xs"), "CB": ("CB",), "states": ("states",)}


def chunked(t: torch.Tensor, q: int) -> torch.Tensor:
    """``(b, L, ...) -> (b, chunks, q, ...)``, the tail padded with zeros."""
    pad = (-t.shape[1]) % q
    if pad:
        t = torch.cat([t, t.new_zeros(t.shape[0], pad, *t.shape[2:])], dim=1)
    return t.reshape(t.shape[0], -1, q, *t.shape[2:])


def _per_chunk(s: torch.Tensor, n: int) -> torch.Tensor:
    """A per-chunk scale ``(chunks, ...)`` for ``n`` chunks: chunks past the calibrated ones use the largest."""
    if n <= s.shape[0]:
        return s[:n]
    return torch.cat([s, s.amax(0, keepdim=True).expand(n - s.shape[0], *s.shape[1:])])


@torch.no_grad()
def observe(x, dt, A, B, C, chunk_size: int) -> dict[str, torch.Tensor]:
    """The float SSD's amax at every quantisation point (the calibration statistics of one batch).

    Arguments:
        x: ``(b, L, heads, headdim)``; dt: ``(b, L, heads)`` after softplus; A: ``(heads,)``;
        B, C: ``(b, L, groups, N)``.
    Returns:
        amax per axis, shaped as the fields of :class:`SSDScales`.
    """
    q = chunk_size
    dtc, dA = ssd_chunk_cumsum(dt, A, q)  # (b, h, c, q)
    xc = chunked(x, q)  # (b, c, q, h, p)
    to_end = torch.exp(dA[..., -1:] - dA) * dtc
    xs = xc * rearrange(to_end, "b h c q -> b c q h 1")
    chunk_states = ssd_chunk_state(B, x, dtc, dA)  # (b, c, h, p, n)
    states, _ = ssd_state_passing(chunk_states, dA)
    # the chunk states and the states passed on share one INT8 scale (the state passing adds their codes)
    both = torch.maximum(amax(states, (2, 3)), amax(chunk_states, (2, 3)))
    return {"x": amax(xc, (1, 3, 4)), "xs": amax(xs, (1, 3, 4)), "B": amax(B, (2,)), "C": amax(C, (2,)),
            "CB": amax(ssd_bmm(C, B, q), (2,)), "states": both}


def outlier_vector(d_inner: int, n: int, factor: float, seed: int) -> torch.Tensor:
    """``(d_inner,)`` ones, with ``n`` channels (drawn from ``seed``) set to ``factor``."""
    out = torch.ones(d_inner)
    idx = torch.randperm(d_inner, generator=torch.Generator().manual_seed(seed))[:n]
    out[idx] = factor
    return out


# --------------------------------------------------------------------------------------------------------------------
# The INT8 SSD
# --------------------------------------------------------------------------------------------------------------------
def _gate(dA_end: torch.Tensor, k: int) -> torch.Tensor:
    """``(b, heads, chunks)`` int32: each chunk's decay as a ``k``-bit fixed-point int8 code (the state passing's)."""
    return torch.floor(torch.exp(dA_end.float()) * 2.0 ** k + 0.5).clamp_(-127, 127).to(torch.int32)


def quant_state_passing(q_chunk: torch.Tensor, dA_end: torch.Tensor, decay_bits: int = 7) -> torch.Tensor:
    """SSDi8's integer state passing: the states entering each chunk from the INT8 chunk states.

    ``S_{c+1} = ((S_c · g_c + 2^(k-1)) >> k) + Q(chunk state c)`` in int32, with the chunk's decay as a ``k``-bit
    fixed-point gate ``g_c = clamp(⌊e^(dA_end) 2^k + ½⌋, -127, 127)`` (an int8 code: at ``k = 7`` the largest decay
    is 127/128), the shift rounding to the nearest; the states are stored as INT8, clamped to ±127. Chunk states and
    passed states share one scale, so no rescaling happens between chunks.

    Arguments:
        q_chunk: ``(b, chunks, heads, headdim, N)`` int8 chunk states (each chunk's own contribution).
        dA_end: ``(b, heads, chunks)`` the cumulative log decay at each chunk's end (float).
        decay_bits: ``k``, the gate's fractional bits.
    Returns:
        ``(b, chunks, heads, headdim, N)`` int8: the state entering each chunk (zeros for the first).
    """
    k = int(decay_bits)
    gate = _gate(dA_end, k)
    s32 = torch.zeros_like(q_chunk[:, 0], dtype=torch.int32)  # (b, h, p, n)
    half, out = 1 << (k - 1), []
    for c in range(q_chunk.shape[1]):
        out.append(s32.clamp(-127, 127).to(torch.int8))
        s32 = ((s32 * gate[:, :, c, None, None] + half) >> k) + q_chunk[:, c].to(torch.int32)
    return torch.stack(out, dim=1)


def ssd_int8(x, dt, A, B, C, D, scales: SSDScales, *, chunk_size: int, decay_bits: int = 7, backend: str = "int",
             held: dict | None = None, codes: dict | None = None) -> torch.Tensor:
    """Mamba-2's SSD with INT8 activations and int32 accumulation (the stages of the module docstring).

    Arguments:
        x: ``(b, L, heads, headdim)``; dt: ``(b, L, heads)`` after softplus; A: ``(heads,)``;
        B, C: ``(b, L, groups, N)``; D: ``(heads,)``.
        scales: :class:`SSDScales` (axis-aware, or :meth:`SSDScales.per_tensor`).
        decay_bits: fractional bits ``k`` of the fixed-point chunk decay.
        backend: ``int`` (the Numba kernels of :mod:`kernels.ssd_int8`: int8 codes, int32 sums, the float
            tail fused; every code as the ``fake`` path's, the output to float rounding) or ``fake`` (the fake-quant
            twin: the stages below as torch ops, the codes multiplied as float32; see :func:`quant.qmatmul`).
        held: if a dict, filled with ``name -> (numel, bytes per element)`` of the tensors held between stages.
        codes: if a dict, filled with the int8 codes as :func:`_ssd_int8_kernels` returns them (``x``, ``B``,
            ``C``, ``CB`` with its upper triangle zeroed, ``chunk_states``, ``states``; the states
            ``(b, c, h, N, headdim)``), for either backend: what the two must agree on bit for bit.
    Returns:
        ``y`` ``(b, L, heads, headdim)`` float32 (no gate; D skip included).
    """
    if backend == "int":
        y, got = _ssd_int8_kernels(x, dt, A, B, C, D, scales, int(chunk_size), int(decay_bits), held)
        if codes is not None:
            codes.update(got, CB=got["CB"].tril())
        return y
    if backend != "fake":
        raise ValueError(f"backend={backend!r} is not allowed; allowed: 'int', 'fake'")
    b, L, h, p = x.shape
    g, q = B.shape[2], int(chunk_size)
    dtc, dA = ssd_chunk_cumsum(dt, A, q)  # (b, h, c, q), float
    nc = dA.shape[2]
    s_x = _per_chunk(scales.x, nc)[:, None]  # (c, 1, h, p)
    s_xs = _per_chunk(scales.xs, nc)  # (c, h, p)
    s_B, s_C = scales.B[:, None, None], scales.C[:, None, None]  # (g, 1, 1)
    qx = quantize(chunked(x, q), s_x)  # (b, c, q, h, p) int8, reused by every stage
    xd = dequantize(qx, s_x)
    qB = rearrange(quantize(chunked(B, q), scales.B[:, None]), "b c q g n -> b c g q n")
    qC = rearrange(quantize(chunked(C, q), scales.C[:, None]), "b c q g n -> b c g q n")
    # C·Bᵀ in INT8, then held as INT8 with its own scale
    CB = qmatmul(qC, qB.transpose(-1, -2), s_C, s_B, backend)  # (b, c, g, q, q)
    qCB = quantize(CB, scales.CB[:, None, None])
    # chunk states from x · dt · decay-to-end (the element-wise factors applied before quantising, in float)
    to_end = torch.exp(dA[..., -1:] - dA) * dtc  # (b, h, c, q)
    xs = xd * rearrange(to_end, "b h c q -> b c q h 1")
    qxs = quantize(xs, s_xs[:, None])  # (b, c, q, h, p)
    a = rearrange(qxs, "b c q (g r) p -> b c g (r p) q", g=g)
    sa = rearrange(s_xs, "c (g r) p -> c g (r p) 1", g=g)
    # chunk states requantised to INT8 on the states' scale (per head and headdim), as the state passing reads them
    chunk_f = rearrange(qmatmul(a, qB, sa, s_B, backend), "b c g (r p) n -> b c (g r) p n", p=p)
    s_S = scales.states[:, :, None]  # (h, p, 1)
    q_chunk = quantize(chunk_f, s_S)  # (b, c, h, p, n) int8
    qS = quant_state_passing(q_chunk, dA[..., -1], decay_bits)  # (b, c, h, p, n) int8: the states entering
    # what the entering state gives: Q(C) Q(S)ᵀ in INT8, times the decay from the chunk's start (float)
    bS = rearrange(qS, "b c (g r) p n -> b c g n (r p)", g=g)
    sS = rearrange(scales.states, "(g r) p -> g 1 (r p)", g=g)
    y_off = rearrange(qmatmul(qC, bS, s_C, sS, backend), "b c g q (r p) -> b c q (g r) p", p=p)
    y_off = y_off * rearrange(torch.exp(dA), "b h c q -> b c q h 1")
    # inside the chunk: (CB ⊙ L ⊙ dt) x on the INT8 codes, in float
    seg = dA[..., :, None] - dA[..., None, :]  # (b, h, c, q, q)
    seg = torch.exp(seg.masked_fill(~torch.ones(q, q, dtype=torch.bool).tril(), float("-inf")))
    scores = dequantize(qCB, scales.CB[:, None, None]).repeat_interleave(h // g, dim=2)  # (b, c, h, q, q)
    scores = scores * rearrange(seg, "b h c i j -> b c h i j") * rearrange(dtc, "b h c j -> b c h 1 j")
    y = torch.einsum("bchij,bcjhp->bcihp", scores, xd) + y_off + D[:, None] * xd
    if held is not None:
        for name, t in (("x", qx), ("B", qB), ("C", qC), ("CB", qCB), ("xs", qxs), ("chunk_states", q_chunk),
                        ("states", qS)):
            held[name] = (t.numel(), t.element_size())
    if codes is not None:
        codes.update(x=qx, B=qB, C=qC, CB=qCB.tril(), chunk_states=rearrange(q_chunk, "b c h p n -> b c h n p"),
                     states=rearrange(qS, "b c h p n -> b c h n p"))
    return y.reshape(b, -1, h, p)[:, :L]


def _ssd_int8_kernels(x, dt, A, B, C, D, scales: SSDScales, q: int, decay_bits: int, held: dict | None):
    """:func:`ssd_int8` on the Numba kernels (backend ``int``): the same codes and int32 sums, the float tail
    fused. Returns ``y`` and the codes (``x``, ``B``, ``C``, ``CB`` lower triangle, ``chunk_states``, ``states``;
    the states ``(b, c, h, N, headdim)``)."""
    from kernels import ssd_int8 as nk

    x, dt, A, B, C, D = (t.detach() for t in (x, dt, A, B, C, D))  # inference only: no autograd through the codes
    b, L, h, p = x.shape
    g, n = B.shape[2], B.shape[3]
    dtc, dA = (t.float().contiguous() for t in ssd_chunk_cumsum(dt, A, q))  # (b, h, c, q)
    nc = dA.shape[2]
    xc, Bc, Cc = (chunked(t.float(), q).contiguous() for t in (x, B, C))  # (b, c, q, h, p), (b, c, q, g, n)
    to_end = (torch.exp(dA[..., -1:] - dA) * dtc).contiguous()  # (b, h, c, q), as the torch path
    s_x, s_xs = (_per_chunk(s, nc).float().contiguous() for s in (scales.x, scales.xs))  # (c, h, p)
    s_B, s_C, s_CB, s_S = (t.float().contiguous() for t in (scales.B, scales.C, scales.CB, scales.states))
    qx = torch.empty(b, nc, q, h, p, dtype=torch.int8)
    qB, qC = (torch.empty(b, nc, g, q, n, dtype=torch.int8) for _ in range(2))
    q_chunk, qS = (torch.empty(b, nc, h, n, p, dtype=torch.int8) for _ in range(2))  # headdim innermost
    qCB = torch.empty(b, nc, g, q, q, dtype=torch.int8)
    y = torch.empty(b, nc, q, h, p)
    npy = lambda t: t.numpy()  # noqa: E731
    nk.int8_chunk_states(*map(npy, (xc, Bc, Cc, s_x, s_xs, s_B, s_C, s_CB, s_S, to_end, qx, qB, qC, qCB, q_chunk)))
    nk.int8_state_passing(q_chunk.numpy(), _gate(dA[..., -1], decay_bits).contiguous().numpy(), decay_bits,
                          qS.numpy())
    nk.int8_chunk_scan(*map(npy, (qx, qC, qCB, qS, s_x, s_C, s_CB, s_S, dtc, dA, torch.exp(dA), D.float(), y)))
    if held is not None:  # the stage boundaries of the torch path (qxs lives inside the first kernel here)
        for name, t in (("x", qx), ("B", qB), ("C", qC), ("CB", qCB), ("xs", qx), ("chunk_states", q_chunk),
                        ("states", qS)):
            held[name] = (t.numel(), t.element_size())
    codes = {"x": qx, "B": qB, "C": qC, "CB": qCB, "chunk_states": q_chunk, "states": qS}
    return y.reshape(b, -1, h, p)[:, :L], codes


def ssd_variant(variant: str, x, dt, A, B, C, D, scales: SSDScales | None, chunk_size: int, *,
                decay_bits: int = 7, backend: str = "int", held: dict | None = None) -> torch.Tensor:
    """One layer's SSD output ``(b, L, heads, headdim)`` under ``variant`` (:data:`VARIANTS`; the correction is
    added by the caller). Arguments as for :func:`ssd_int8`; ``scales`` are the axis-aware ones (unused by
    ``fp32``; ``input_only`` takes the largest of each of x, B, C: one scale per tensor; ``input_group`` the
    largest over chunks of x's, B's and C's per group)."""
    if variant == "fp32":
        return kernels.ssd(x, dt, A, B, C, chunk_size, D=D)
    if variant in INPUT_ONLY:  # x, B, C quantised at the SSD's entry, everything after in float
        if variant == "input_only":  # Quamba-style: one scale per tensor
            s = {k: getattr(scales, k).max() for k in ("x", "B", "C")}
        else:  # Quamba2-style: x per (head, headdim) channel, B and C per group
            s = {"x": scales.x.amax(0), "B": scales.B[:, None], "C": scales.C[:, None]}
        hooks = {k: (lambda t, k=k: fake_quant(t, s[k])) for k in s}
        return kernels.ssd(x, dt, A, B, C, chunk_size, D=D, hooks=hooks)
    if variant not in VARIANTS:
        raise ValueError(f"variant={variant!r} is not allowed; allowed: {', '.join(VARIANTS)}")
    if variant == "per_tensor":
        scales = scales.per_tensor()
    return ssd_int8(x, dt, A, B, C, D, scales, chunk_size=chunk_size, decay_bits=decay_bits, backend=backend,
                    held=held)
