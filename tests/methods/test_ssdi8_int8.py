"""SSDi8's INT8 SSD on the Numba kernels (backend ``int``, :mod:`kernels._numba.ssd_int8`): every int8 code equal to
the torch stages' (quantisers of :mod:`lab.methods.ssdi8.quant`, products of the codes, the integer state passing)
bit for bit, and the output equal to the same codes' float tail in float64 within float32 rounding."""

import pytest
import torch
from einops import rearrange

from kernels.ssd import ssd_chunk_cumsum
from lab.methods.ssdi8 import model as M
from lab.methods.ssdi8 import quant as Q


def _inputs(b, L, h, p, g, n, seed=0, outlier=None):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(b, L, h, p, generator=gen)
    if outlier is not None:
        x[..., 0, 0] *= outlier
    dt = torch.nn.functional.softplus(torch.randn(b, L, h, generator=gen) - 2)
    A = -torch.rand(h, generator=gen) * 4 - 0.5
    B, C = torch.randn(b, L, g, n, generator=gen), torch.randn(b, L, g, n, generator=gen)
    return x, dt, A, B, C, torch.randn(h, generator=gen)


def _torch_codes(x, dt, A, B, C, scales, q, k):
    """The codes of the torch stages (the ``fake`` path's steps, written out) and the float64 tail on them."""
    dtc, dA = ssd_chunk_cumsum(dt, A, q)  # (b, h, c, q)
    nc, g = dA.shape[2], B.shape[2]
    s_x = M._per_chunk(scales.x, nc)[:, None]  # (c, 1, h, p)
    s_xs = M._per_chunk(scales.xs, nc)  # (c, h, p)
    qx = Q.quantize(M.chunked(x, q), s_x)  # (b, c, q, h, p)
    qB = rearrange(Q.quantize(M.chunked(B, q), scales.B[:, None]), "b c q g n -> b c g q n")
    qC = rearrange(Q.quantize(M.chunked(C, q), scales.C[:, None]), "b c q g n -> b c g q n")
    s_B, s_C = scales.B[:, None, None], scales.C[:, None, None]
    qCB = Q.quantize(Q.qmatmul(qC, qB.transpose(-1, -2), s_C, s_B, "int"), scales.CB[:, None, None])
    xs = Q.dequantize(qx, s_x) * rearrange(torch.exp(dA[..., -1:] - dA) * dtc, "b h c q -> b c q h 1")
    qxs = Q.quantize(xs, s_xs[:, None])
    a = rearrange(qxs, "b c q (g r) p -> b c g (r p) q", g=g)
    chunk_f = Q.qmatmul(a, qB, rearrange(s_xs, "c (g r) p -> c g (r p) 1", g=g), s_B, "int")
    chunk_f = rearrange(chunk_f, "b c g (r p) n -> b c (g r) p n", p=x.shape[3])
    q_chunk = Q.quantize(chunk_f, scales.states[:, :, None])  # (b, c, h, p, n)
    qS = M.quant_state_passing(q_chunk, dA[..., -1], k)  # (b, c, h, p, n)
    # the tail in float64 on these codes: sum_j (CB_ij L_ij dt_j) xd_j + e^(cum_i) C_i S^T + D xd_i
    f = torch.float64
    xd = qx.to(f) * s_x.to(f)  # (b, c, q, h, p)
    seg = (dA[..., :, None] - dA[..., None, :]).to(f)
    seg = torch.exp(seg.masked_fill(~torch.ones(q, q, dtype=torch.bool).tril(), float("-inf")))
    r = x.shape[2] // g
    cb = (qCB.to(f) * scales.CB.to(f)[:, None, None]).repeat_interleave(r, dim=2)  # (b, c, h, q, q)
    terms = cb * rearrange(seg, "b h c i j -> b c h i j") * rearrange(dtc.to(f), "b h c j -> b c h 1 j")
    s_off = rearrange(qS.to(f) * scales.states.to(f)[:, :, None], "b c h p n -> b c h n p")
    c_rep = (qC.to(f) * scales.C.to(f)[:, None, None]).repeat_interleave(r, dim=2)  # (b, c, h, q, n)
    off = torch.einsum("bchin,bchnp->bcihp", c_rep, s_off) * rearrange(torch.exp(dA.to(f)), "b h c q -> b c q h 1")
    y64 = torch.einsum("bchij,bcjhp->bcihp", terms, xd) + off
    # what a float32 evaluation may round: the sum of the terms' magnitudes (per output)
    mag = torch.einsum("bchij,bcjhp->bcihp", terms.abs(), xd.abs()) + off.abs()
    codes = {"x": qx, "B": qB, "C": qC, "CB": qCB.tril(),
             "chunk_states": rearrange(q_chunk, "b c h p n -> b c h n p"),
             "states": rearrange(qS, "b c h p n -> b c h n p")}
    return codes, y64, mag, xd


CASES = [  # (batch, length, heads, headdim, groups, state, chunk): lab bench int8's quick shapes, a length that pads
    (4, 256, 4, 32, 4, 16, 32),  # the last chunk, several heads per group, an odd state and an odd chunk size
    (2, 50, 4, 8, 2, 8, 16),
    (1, 37, 6, 5, 3, 7, 9),
    (2, 160, 2, 16, 1, 32, 64),
]


@pytest.mark.parametrize("shape", CASES)
@pytest.mark.parametrize("per_tensor", [False, True])
def test_the_numba_int8_ssd_keeps_every_code_and_rounds_only_the_float_tail(shape, per_tensor):
    b, L, h, p, g, n, q = shape
    x, dt, A, B, C, D = _inputs(b, L, h, p, g, n, outlier=30.0 if per_tensor else None)
    scales = M.SSDScales.from_amax(M.observe(x, dt, A, B, C, q))
    scales = scales.per_tensor() if per_tensor else scales
    y, got = M._ssd_int8_kernels(x, dt, A, B, C, D, scales, q, 7, None)
    want, y64, mag, xd = _torch_codes(x, dt, A, B, C, scales, q, 7)
    for name, t in want.items():
        assert got[name].dtype == torch.int8, name
        assert torch.equal(got[name].tril() if name == "CB" else got[name], t), name
    assert min(int(got[k].abs().max()) for k in want) > 63  # the codes span the range: a real check
    # float32 evaluation of a sum of m terms: |error| <= (m + 2) eps sum|terms| (the decay's exp adds a few ulp)
    eps = torch.finfo(torch.float32).eps
    y64 = (y64 + xd * D.double()[:, None]).reshape(b, -1, h, p)[:, :L]
    bound = (q + n + 8) * eps * (mag + (xd * D.double()[:, None]).abs()).reshape(b, -1, h, p)[:, :L]
    assert y.dtype == torch.float32 and y.shape == x.shape
    assert bool(((y.double() - y64).abs() <= bound).all())
    # the torch stages (the fake-quant twin) meet the same bound: the two differ by float rounding only
    fake_codes, int_codes = {}, {}
    fake = M.ssd_int8(x, dt, A, B, C, D, scales, chunk_size=q, backend="fake", codes=fake_codes).double()
    assert bool(((fake - y64).abs() <= bound).all())
    # both backends hand out the codes they formed, in one layout (what the twin claims compare)
    assert torch.equal(M.ssd_int8(x, dt, A, B, C, D, scales, chunk_size=q, codes=int_codes), y)
    assert fake_codes.keys() == int_codes.keys() == want.keys()
    for name, t in want.items():
        assert torch.equal(fake_codes[name], t) and torch.equal(int_codes[name], t), name


def test_the_numba_int8_ssd_fills_held_as_the_torch_stages():
    x, dt, A, B, C, D = _inputs(2, 40, 4, 8, 2, 8)
    scales = M.SSDScales.from_amax(M.observe(x, dt, A, B, C, 16))
    held_int, held_fake = {}, {}
    M.ssd_int8(x, dt, A, B, C, D, scales, chunk_size=16, held=held_int)
    M.ssd_int8(x, dt, A, B, C, D, scales, chunk_size=16, backend="fake", held=held_fake)
    assert held_int == held_fake


def test_an_unknown_backend_is_refused():
    x, dt, A, B, C, D = _inputs(1, 16, 2, 4, 1, 4)
    scales = M.SSDScales.from_amax(M.observe(x, dt, A, B, C, 16))
    with pytest.raises(ValueError, match="backend="):
        M.ssd_int8(x, dt, A, B, C, D, scales, chunk_size=16, backend="int4")
