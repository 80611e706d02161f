"""SSDi8: the quantisers and the int8 product against their fake-quant twin, the INT8 SSD against the float kernel
(axis-aware close, per-tensor broken by an outlier channel, fixed-point decay), the language model's quantised
forward (the float path equals CausalLM; outliers preserve the function; the correction removes the calibration
mean), the corpus splits, bad input, the ci run's claims and the dashboard's live API."""

import dataclasses
import math

import numpy as np
import pytest
import torch
import xarray as xr
from click.testing import CliRunner

import kernels
from lab.cli import cli
from lab.config import ConfigError
from lab.methods.ssdi8 import lm as LM
from lab.methods.ssdi8 import model as M
from lab.methods.ssdi8 import quant as Q
from lab.methods.ssdi8 import train as T
from lab.methods.ssdi8.claims import CLAIMS
from lab.methods.ssdi8.config import Config


def _ssd_inputs(b=2, L=64, h=4, p=8, g=1, n=8, seed=0, outlier=None):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(b, L, h, p, generator=gen)
    if outlier is not None:
        x[..., 0, 0] *= outlier  # one channel far larger than the rest
    dt = torch.nn.functional.softplus(torch.randn(b, L, h, generator=gen) - 2)
    A = -torch.rand(h, generator=gen) * 4 - 0.5
    B, C = torch.randn(b, L, g, n, generator=gen), torch.randn(b, L, g, n, generator=gen)
    D = torch.randn(h, generator=gen)
    return x, dt, A, B, C, D


def _rel(a, b):
    return float(((a - b) ** 2).sum() / (b ** 2).sum())


# --------------------------------------------------------------------------------------------------------------------
# quantisers and the int8 product
# --------------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("bits", [4, 8])
def test_quantize_rounds_to_the_nearest_code_and_saturates(bits):
    t = torch.linspace(-3, 3, 1001)
    s = Q.scale_of(torch.tensor(2.0), bits)  # amax 2: values beyond saturate
    q = Q.quantize(t, s, bits)
    assert q.dtype == torch.int8 and int(q.abs().max()) == Q.qmax(bits)
    inside = t.abs() <= 2
    assert float((Q.dequantize(q, s) - t)[inside].abs().max()) <= float(s) / 2 + 1e-6
    assert torch.equal(Q.dequantize(q, s)[~inside].abs(), torch.full_like(t[~inside], float(s) * Q.qmax(bits)))


def test_the_evaluations_use_the_twin_only_where_it_is_exact():
    """The accuracy evaluations run on the fake-quant twin (batched float32 products of the codes) only where every
    int32 sum is below 2^24, so that float32 holds it exactly; a deeper product goes through torch._int_mm."""
    from lab.methods.ssdi8.measure import backend

    assert backend(Config.from_profile("quick")) == "fake" and backend(Config.from_profile("full")) == "fake"
    assert backend(Config.from_profile("quick", d_model=1024, headdim=32, ngroups=4)) == "int"
    depth = (2 ** 24 - 1) // 127 ** 2  # the deepest exact product: every code at the extreme
    qa, qb = torch.full((1, 3, depth), -127, dtype=torch.int8), torch.full((1, depth, 2), -127, dtype=torch.int8)
    one = torch.ones(())
    assert torch.equal(Q.qmatmul(qa, qb, one, one, "fake"), Q.qmatmul(qa, qb, one, one, "int"))


def test_amax_keeps_the_named_axes():
    t = torch.arange(24.0).reshape(2, 3, 4) - 5
    np.testing.assert_array_equal(Q.amax(t, (1,)).numpy(), t.abs().amax((0, 2)).numpy())
    np.testing.assert_array_equal(Q.amax(t, (2, 0)).numpy(), t.abs().amax(1).T.numpy())
    assert float(Q.amax(t)) == 18.0


@pytest.mark.parametrize("shape", [(1, 5, 7, 3), (3, 17, 32, 9), (2, 1, 16, 33)])
def test_int_mm_equals_its_fake_quant_twin_bit_for_bit(shape):
    """int8 x int8 -> int32 by torch._int_mm (any sizes on this CPU, no multiple-of-8 padding needed) against float
    products of the codes: the same numbers; and within float rounding of the dequantise-first product."""
    bsz, m, k, n = shape
    gen = torch.Generator().manual_seed(1)
    qa = torch.randint(-127, 128, (bsz, m, k), generator=gen, dtype=torch.int8)
    qb = torch.randint(-127, 128, (bsz, k, n), generator=gen, dtype=torch.int8)
    sa, sb = torch.rand(bsz, m, 1, generator=gen) + 0.1, torch.rand(1, 1, n, generator=gen) + 0.1
    out = Q.qmatmul(qa, qb, sa, sb, "int")
    assert torch.equal(out, Q.qmatmul(qa, qb, sa, sb, "fake"))
    exact = (qa.double() @ qb.double()) * sa.double() * sb.double()
    torch.testing.assert_close(out.double(), exact, rtol=1e-6, atol=0)
    textbook = (qa.float() * sa) @ (qb.float() * sb)  # float rounding, amplified where the sum cancels
    torch.testing.assert_close(out, textbook, rtol=0, atol=1e-5 * float(out.abs().max()))
    with pytest.raises(ValueError, match="backend="):
        Q.qmatmul(qa, qb, sa, sb, "fp8")


@pytest.mark.parametrize("bits", [4, 8])
def test_qlinear_is_close_to_the_float_layer(bits):
    torch.manual_seed(0)
    lin = torch.nn.Linear(24, 40, bias=False)
    x = torch.randn(3, 11, 24)
    ql = Q.QLinear.from_linear(lin, bits, Q.amax(x))
    y = ql(x, "int")
    assert y.shape == (3, 11, 40) and torch.equal(y, ql(x, "fake"))
    assert _rel(y, lin(x).detach()) < (1e-3 if bits == 8 else 3e-2)
    assert ql.weight_t.dtype == torch.int8 and int(ql.weight_t.abs().max()) <= Q.qmax(bits)
    assert ql.nbytes < lin.weight.nbytes / 3


# --------------------------------------------------------------------------------------------------------------------
# the INT8 SSD
# --------------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("L,g", [(64, 1), (50, 2)])
def test_axis_aware_int8_ssd_is_close_to_the_float_kernel(L, g):
    x, dt, A, B, C, D = _ssd_inputs(L=L, g=g)
    scales = M.SSDScales.from_amax(M.observe(x, dt, A, B, C, 16))
    ref = kernels.ssd(x, dt, A, B, C, 16, D=D)
    y = M.ssd_int8(x, dt, A, B, C, D, scales, chunk_size=16, decay_bits=7)
    assert y.shape == ref.shape
    assert _rel(y, ref) < 2e-4
    # the Numba int path and the torch stages share every code (bit for bit: tests/methods/test_ssdi8_int8.py); their
    # float tails sum in different orders: they agree to float32 rounding of a chunk's sums (16 + 8 terms here)
    fake = M.ssd_int8(x, dt, A, B, C, D, scales, chunk_size=16, decay_bits=7, backend="fake")
    assert float((y - fake).abs().max()) <= 2 * (16 + 8) * torch.finfo(torch.float32).eps * float(fake.abs().max())


def test_an_outlier_channel_breaks_per_tensor_scales_but_not_axis_aware_ones():
    x, dt, A, B, C, D = _ssd_inputs(outlier=50.0)
    scales = M.SSDScales.from_amax(M.observe(x, dt, A, B, C, 16))
    ref = kernels.ssd(x, dt, A, B, C, 16, D=D)
    err = {v: _rel(M.ssd_variant(v, x, dt, A, B, C, D, scales, 16)[..., 1:, :], ref[..., 1:, :])
           for v in ("input_only", "per_tensor", "axis_aware")}  # the heads without the outlier channel
    assert err["axis_aware"] < 1e-3
    assert err["per_tensor"] > 10 * err["axis_aware"] and err["input_only"] > 10 * err["axis_aware"]
    full = scales.per_tensor()
    assert full.x.shape == scales.x.shape and float(full.x.min()) == float(scales.x.max())


def test_input_only_quantises_x_B_C_once_per_tensor():
    x, dt, A, B, C, D = _ssd_inputs(seed=3)
    scales = M.SSDScales.from_amax(M.observe(x, dt, A, B, C, 16))
    s = {k: getattr(scales, k).max() for k in ("x", "B", "C")}
    expect = kernels.ssd(Q.fake_quant(x, s["x"]), dt, A, Q.fake_quant(B, s["B"]), Q.fake_quant(C, s["C"]), 16, D=D)
    torch.testing.assert_close(M.ssd_variant("input_only", x, dt, A, B, C, D, scales, 16), expect)
    with pytest.raises(ValueError, match="variant="):
        M.ssd_variant("fp16", x, dt, A, B, C, D, scales, 16)


def test_the_fixed_point_decay_costs_precision_as_its_bits_shrink():
    x, dt, A, B, C, D = _ssd_inputs(L=128, seed=4)
    scales = M.SSDScales.from_amax(M.observe(x, dt, A, B, C, 16))
    ref = kernels.ssd(x, dt, A, B, C, 16, D=D)
    err = [_rel(M.ssd_int8(x, dt, A, B, C, D, scales, chunk_size=16, decay_bits=k), ref) for k in (2, 4, 7)]
    assert err[0] > err[1] > err[2]


def _state_passing_by_hand(q_chunk, dA_end, k):
    """The integer state passing element by element in Python integers (round half away from zero for the gate,
    floor division for the shift: an arithmetic right shift)."""
    b, nc, h, p, n = q_chunk.shape
    out = np.zeros(q_chunk.shape, np.int64)
    for bi in range(b):
        for hi in range(h):
            gates = [max(-127, min(127, math.floor(math.exp(float(dA_end[bi, hi, c])) * 2 ** k + 0.5)))
                     for c in range(nc)]
            for pi in range(p):
                for ni in range(n):
                    s = 0
                    for c in range(nc):
                        out[bi, c, hi, pi, ni] = max(-127, min(127, s))
                        s = (s * gates[c] + 2 ** (k - 1)) // 2 ** k + int(q_chunk[bi, c, hi, pi, ni])
    return out


@pytest.mark.parametrize("k", [3, 7])
def test_integer_state_passing_matches_the_hand_computation(k):
    """khw980/SSDi8's quant_state_passing: int8 chunk states, int32 accumulation, a k-bit gate clamped to the int8
    range, rounding shift, stored states clamped to ±127 (large codes and slow decays make the clamps bite)."""
    gen = torch.Generator().manual_seed(7)
    q_chunk = torch.randint(-127, 128, (2, 6, 3, 2, 4), generator=gen, dtype=torch.int8)
    dA_end = -torch.rand(2, 3, 6, generator=gen) * torch.tensor([0.001, 0.5, 3.0])[None, :, None]
    got = M.quant_state_passing(q_chunk, dA_end, k)
    assert got.dtype == torch.int8 and not got[:, 0].any()
    np.testing.assert_array_equal(got.numpy(), _state_passing_by_hand(q_chunk.numpy(), dA_end.numpy(), k))
    assert int(got.abs().max()) == 127  # the clamp was reached


def test_integer_state_passing_follows_the_float_one_within_its_codes():
    """Small codes (no clamp): the integer states stay within a few codes of the float recursion with the same
    quantised gate, and the first chunk's state is the first chunk state itself."""
    gen = torch.Generator().manual_seed(8)
    q_chunk = torch.randint(-20, 21, (1, 5, 2, 3, 4), generator=gen, dtype=torch.int8)
    dA_end = -torch.rand(1, 2, 5, generator=gen)
    got = M.quant_state_passing(q_chunk, dA_end, 7).float()
    gate = torch.floor(torch.exp(dA_end) * 128 + 0.5).clamp(max=127) / 128
    s, ref = torch.zeros_like(q_chunk[:, 0], dtype=torch.float32), []
    for c in range(5):
        ref.append(s)
        s = gate[:, :, c, None, None] * s + q_chunk[:, c].float()
    ref = torch.stack(ref, 1)
    assert torch.equal(got[:, 1], q_chunk[:, 0].float())
    assert float((got - ref).abs().max()) <= 2.0


def test_the_int8_path_holds_int8_between_stages():
    x, dt, A, B, C, D = _ssd_inputs()
    held = {}
    M.ssd_int8(x, dt, A, B, C, D, M.SSDScales.from_amax(M.observe(x, dt, A, B, C, 16)), chunk_size=16, held=held)
    assert {k for k, (_, size) in held.items() if size == 1} == {"x", "B", "C", "CB", "xs", "chunk_states",
                                                                 "states"}
    assert held["x"][0] == x.numel()


def test_input_group_quantises_x_per_channel_and_B_C_per_group():
    x, dt, A, B, C, D = _ssd_inputs(g=2, seed=5)
    scales = M.SSDScales.from_amax(M.observe(x, dt, A, B, C, 16))
    assert scales.B.shape == (2,)
    expect = kernels.ssd(Q.fake_quant(x, scales.x.amax(0)), dt, A, Q.fake_quant(B, scales.B[:, None]),
                         Q.fake_quant(C, scales.C[:, None]), 16, D=D)
    torch.testing.assert_close(M.ssd_variant("input_group", x, dt, A, B, C, D, scales, 16), expect)
    ref = kernels.ssd(x, dt, A, B, C, 16, D=D)
    assert _rel(expect, ref) < _rel(M.ssd_variant("input_only", x, dt, A, B, C, D, scales, 16), ref)


def test_clustered_difference():
    from scipy.stats import t as student_t

    from lab.methods.ssdi8.claims import CONFIDENCE, MARGIN, clustered_difference

    assert MARGIN == pytest.approx(100 * (math.log(7.49) / math.log(7.25) - 1)) and 1.6 < MARGIN < 1.7
    a = np.array([1.0, 2.0, 3.0, 4.0])
    # one sequence per file: CR1 is sqrt(G / (G - 1)) x the residuals' root sum of squares / n
    d = clustered_difference(a + 0.5 + np.array([0.1, -0.1, 0.1, -0.1]), a, np.arange(4))
    iid = np.std([0.1, -0.1] * 2, ddof=1) / 2
    assert d.mean == pytest.approx(0.5) and d.naive_se == pytest.approx(iid)
    assert d.se == pytest.approx(math.sqrt(4 / 3 * 4 * 0.01) / 4) and d.files == 4
    assert d.upper == pytest.approx(0.5 + student_t.ppf(CONFIDENCE, 3) * d.se) and d.z == pytest.approx(0.5 / d.se)
    # two files whose sequences move together: the clustered standard error sees it, the i.i.d. one does not
    shift = np.array([0.1, 0.1, -0.1, -0.1])
    d = clustered_difference(a + shift, a, [0, 0, 1, 1])
    assert d.files == 2 and d.se > 1.5 * d.naive_se
    assert clustered_difference(a + shift, a, [5, 5, 5, 5]).se == math.inf  # one file: no bound
    assert clustered_difference(a, a, [0, 0, 1, 1]).z == 0.0


def _headline_data(per_tensor_rise: float, spread: float = 0.01, seeds: int = 3, files: int = 12, per_file: int = 8,
                   seed: int = 0):
    """A synthetic run holding only what the non-inferiority claims read: W8A8 losses per sequence ``(seed,
    candidate, eval_seq)`` with and without outliers (input-only quantisers near 2.0 nats, SSDi8 at the stronger
    one's level, per tensor ``per_tensor_rise`` (relative) above it with outliers, at its level without), file ids."""
    import xarray as xr

    rng = np.random.default_rng(seed)
    n, cand = files * per_file, ["fp32", "input_only", "input_group", "per_tensor", "ssdi8"]
    base = 2.0 + 0.2 * rng.standard_normal((seeds, 1, n))  # sequences differ far more than the variants do

    def losses(rise: float):
        noise = spread * rng.standard_normal((seeds, len(cand), n))
        shift = np.array([0.0, 0.002, 0.0, rise * 2.0, 0.0])[None, :, None]
        return xr.DataArray(base + shift + noise, dims=("seed", "candidate", "eval_seq"),
                            coords={"seed": np.arange(seeds), "candidate": cand})

    return xr.Dataset({"seq_loss_seeds_outliers": losses(per_tensor_rise), "seq_loss_seeds": losses(0.0),
                       "eval_file": ("eval_seq", np.repeat(np.arange(files), per_file))},
                      attrs={"outlier_channels": 2})


def test_outlier_headline_per_sequence_and_control():
    """The headline reads the injected-outlier regime's per-sequence losses, clustered by file: per tensor far above
    the input-only quantisers fails the margin on every seed, SSDi8 at their level passes it; the own-activation row
    (per tensor no worse there) reads the other array and its control passes the margin (no discrimination)."""
    from lab.methods.ssdi8.claims import MARGIN
    from lab.methods.ssdi8.stats import clustered_difference, excess_bounds

    by_name = {c.name: c for c in CLAIMS}
    head, own = by_name["w8a8_int8_ssd_matches_input_only"], by_name["w8a8_own_int8_ssd_matches_input_only"]
    assert head.headline and head.threshold == MARGIN and own.report and not own.headline
    ds = _headline_data(per_tensor_rise=0.03)  # 3% relative above the input-only quantisers, twice the margin
    m, c = head.measure(ds), head.control(ds)
    assert len(m.per_seed) == 3 and max(m.per_seed) < MARGIN and min(c.per_seed) >= MARGIN
    # the bound is computed from the sequences: each seed's equals the clustered bound of the per-sequence losses
    bounds, _ = excess_bounds(ds.seq_loss_seeds_outliers, ds.eval_file.values, "ssdi8")
    s0 = ds.seq_loss_seeds_outliers.isel(seed=0)
    d = clustered_difference(s0.sel(candidate="ssdi8"), s0.sel(candidate="input_group"), ds.eval_file.values)
    assert m.per_seed == pytest.approx(bounds) and bounds[0] == pytest.approx(
        100 * d.upper / float(s0.sel(candidate="input_group").mean()))
    # the same means with noisier sequences: the bound widens (a mean alone would not move)
    noisy = _headline_data(per_tensor_rise=0.03, spread=0.2)
    assert max(head.measure(noisy).per_seed) > max(m.per_seed) + 0.1
    # without the outliers per tensor is at the input-only level: the own-activation row's control passes
    assert min(own.control(ds).per_seed) < MARGIN and max(own.measure(ds).per_seed) < MARGIN
    # and a headline whose control does that does not discriminate
    same = ds.copy(deep=True)
    same["seq_loss_seeds_outliers"] = same.seq_loss_seeds
    assert min(head.control(same).per_seed) < MARGIN


# --------------------------------------------------------------------------------------------------------------------
# the language model
# --------------------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny():
    cfg = Config.from_profile("ci", use_cache=False, d_model=32, headdim=16, chunk_size=16, seq_len=48)
    torch.manual_seed(0)
    model = T.build_model(cfg).eval()
    gen = torch.Generator().manual_seed(5)
    calib = torch.randint(32, 127, (6, 48), generator=gen)
    return cfg, model, calib


def test_float_forward_equals_the_causal_lm_and_outliers_preserve_the_function(tiny):
    cfg, model, calib = tiny
    plain = [LM.LayerQuant(outlier=torch.ones(4, 16)) for _ in range(cfg.n_layers)]
    spiky = [LM.LayerQuant(outlier=M.outlier_vector(64, 3, 100.0, k).reshape(4, 16)) for k in range(cfg.n_layers)]
    with torch.no_grad():
        ref = model(calib)
        torch.testing.assert_close(LM.forward(model, calib, plain, chunk_size=16), ref, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(LM.forward(model, calib, spiky, chunk_size=16), ref, rtol=1e-4, atol=1e-4)


def test_calibration_and_the_correction(tiny):
    cfg, model, calib = tiny
    quant, c_star = LM.quantise(model, calib, outlier_channels=2, outlier_scale=20.0, weight_bits=(8, 4), coef=1.0,
                                chunk_size=16)
    assert set(c_star) == {"fp32", "w8a8", "w4a8"} and c_star["w4a8"][0].shape == (4, 16)
    assert quant[0].scales.x.shape == (3, 4, 16) and quant[0].scales.states.shape == (4, 16)
    assert int((quant[0].outlier > 1).sum()) == 2
    # with coefficient 1 the correction removes layer 0's calibration mean error (layer 0 sees no earlier correction)
    before = LM.Recorder(cfg.n_layers, compare=True)
    after = LM.Recorder(cfg.n_layers, compare=True)
    LM.forward(model, calib, quant, "axis_aware", "w4a8", chunk_size=16, recorder=before)
    LM.forward(model, calib, quant, "ssdi8", "w4a8", chunk_size=16, recorder=after)
    mean_before = before.diff[0] / before.count
    torch.testing.assert_close(mean_before.float(), c_star["w4a8"][0], rtol=1e-4, atol=1e-7)
    assert float((after.diff[0] / after.count).abs().max()) < 1e-4 * float(mean_before.abs().max()) + 1e-7
    assert after.err[0] < before.err[0]
    shuffled = quant[0].correction_for("shuffled", "w4a8")
    assert torch.equal(shuffled.flatten().sort().values, quant[0].correction["w4a8"].flatten().sort().values)
    assert quant[0].correction_for("axis_aware", "w4a8") is None
    # int8 and fake-quant agree through the whole model
    a = LM.forward(model, calib, quant, "ssdi8", "w8a8", chunk_size=16, backend="int")
    assert torch.equal(a, LM.forward(model, calib, quant, "ssdi8", "w8a8", chunk_size=16, backend="fake"))


def test_evaluation_without_the_float_reference_gives_the_same_losses(tiny):
    cfg, model, calib = tiny
    quant, _ = LM.quantise(model, calib, outlier_channels=0, outlier_scale=1.0, weight_bits=(8,), chunk_size=16)
    tokens = torch.cat([calib, calib[:, :1]], dim=1)  # (6, 49): 48 predicted characters per sequence
    with_ref, without = [], []
    loss, err = LM.evaluate(model, tokens, quant, "ssdi8", "w8a8", chunk_size=16, per_sequence=with_ref)
    loss2, none = LM.evaluate(model, tokens, quant, "ssdi8", "w8a8", chunk_size=16, per_sequence=without,
                              compare=False)
    assert none is None and err.shape == (cfg.n_layers,) and float(err.min()) > 0
    assert loss == loss2 and with_ref == without and loss == pytest.approx(np.mean(with_ref))
    reference: list = []
    for _ in range(2):  # the float reference computed by the first evaluation, read by the second: the same error
        loss3, err3 = LM.evaluate(model, tokens, quant, "ssdi8", "w8a8", chunk_size=16, reference=reference)
        assert loss3 == loss and torch.equal(err3, err)
    assert len(reference) == 1 and len(reference[0]) == cfg.n_layers


def test_grid_index_spreads_the_grid_and_partitions_the_rest():
    grid, rest = T.grid_index(10, 4)
    assert grid.tolist() == [0, 3, 6, 9] and rest.tolist() == [1, 2, 4, 5, 7, 8]
    assert T.grid_index(5, 5)[0].tolist() == list(range(5)) and T.grid_index(5, 5)[1].size == 0
    assert T.grid_index(1024, 128)[0].size == 128
    with pytest.raises(ValueError, match="n_grid=6"):
        T.grid_index(5, 6)


def test_corpus_splits_are_disjoint_sorted_and_ascii():
    files = T.corpus_files()
    assert len(files) > 100 and files == T.corpus_files()  # deterministic
    names = [f.name for f in files]
    assert "os.py" in names and not any("site-packages" in f.parts for f in files)
    cal, ev = set(files[7::10]), set(files[9::10])
    assert not cal & ev
    ids = T.encode("déf x\n")
    assert ids.tolist() == [100, 0, 102, 32, 120, 10]


# --------------------------------------------------------------------------------------------------------------------
# bad input
# --------------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("field,value,allowed", [
    ("weight_bits", (16,), "one of 4, 8"),
    ("weight_bits", (8, 8), "no repeats"),
    ("headdim", 48, "a divisor of the inner width"),
    ("correction_scale", -0.1, "[0, 4]"),
    ("outlier_channels", 4000, "at most the inner width"),
    ("ngroups", 3, "a divisor of the 2 heads"),
    ("decay_bits", 8, "[1, 7]"),
    ("n_eval_grid", 33, "at most n_eval = 32"),
])
def test_bad_config_names_field_value_and_allowed(field, value, allowed):
    with pytest.raises(ConfigError, match=rf"^{field}=") as info:
        Config.from_profile("ci", **{field: value})
    assert allowed in str(info.value) and "allowed" in str(info.value)


def test_cli_exits_2_on_a_bad_bit_width():
    res = CliRunner().invoke(cli, ["run", "ssdi8", "-P", "ci", "-p", "weight_bits=6"])
    assert res.exit_code == 2 and "weight_bits" in res.output and "4, 8" in res.output


# --------------------------------------------------------------------------------------------------------------------
# the ci run, its claims and the live API
# --------------------------------------------------------------------------------------------------------------------
def test_twin_claims_fail_on_one_differing_code_or_a_projection_off_by_more_than_rounding():
    """The INT8-vs-fake-quant verdicts can fail: one code of one layer's SSD, or one projection off by 1e-3."""
    def verdicts(differ=(0, 0), ssd=(2e-7, 1e-7), proj=(0.0, 0.0)):
        ds = xr.Dataset({"twin_codes_differ": ("layer", np.array(differ)), "twin_codes": ("layer", [1000, 1000]),
                         "twin_ssd_difference": ("layer", np.array(ssd)),
                         "twin_proj_difference": ("layer", np.array(proj)), "twin_difference": 0.003},
                        attrs={"twin_weights": "w8a8"})
        return {c.name: c.evaluate(ds).verdict for c in CLAIMS
                if c.name in ("int8_codes_equal_fake_quant", "int8_equals_fake_quant", "int8_logits_vs_fake_quant")}

    assert verdicts() == {"int8_codes_equal_fake_quant": "holds", "int8_equals_fake_quant": "holds",
                          "int8_logits_vs_fake_quant": "reported"}
    assert verdicts(differ=(0, 1))["int8_codes_equal_fake_quant"] == "fails"
    assert verdicts(proj=(0.0, 1e-3))["int8_equals_fake_quant"] == "fails"
    assert verdicts(ssd=(2e-7, 1e-3))["int8_equals_fake_quant"] == "fails"
    assert verdicts(proj=(np.nan, np.nan))["int8_equals_fake_quant"] == "holds"  # fp32 weights: the SSD alone


def test_ci_run_and_claims(ci_result):
    res = ci_result("ssdi8")
    ds = res.data
    assert ds.loss.dims == ("variant", "weights") and list(ds.weights.values) == ["fp32", "w8a8", "w4a8"]
    assert np.isfinite(ds.loss).all() and np.isfinite(ds.cpu_time).all()
    assert float(ds.ssd_error.sel(variant="fp32", weights="fp32").max()) == 0.0
    assert res.claims["int8_equals_fake_quant"].verdict == "holds"
    # every code of every layer's SSD as the fake-quant twin's, on the model's own activations
    assert res.claims["int8_codes_equal_fake_quant"].verdict == "holds"
    assert int(ds.twin_codes_differ.sum()) == 0 and (ds.twin_codes > 0).all()
    assert float(ds.twin_proj_difference.max()) == 0.0  # int32 sums below 2^24: the projections bit for bit
    assert res.claims["int8_logits_vs_fake_quant"].verdict == "reported"
    assert float(ds.ssd_bytes.sel(path="int8")) < float(ds.ssd_bytes.sel(path="fp32"))
    # the ci model (a few steps) has not learned its corpus: no accuracy claim can hold on it
    assert 0 < float(ds.bigram_loss) < float(ds.unigram_loss) < math.log(T.VOCAB)
    head = res.claims["w8a8_int8_ssd_matches_input_only"]
    assert head.headline and head.competent is False
    assert res.claims["w8a8_own_int8_ssd_matches_input_only"].verdict == "reported"
    assert all(r.verdict != "holds" for r in res.claims if r.competence)
    # a float model that beats the bigram makes the same measurements competent
    learned = ds.copy(deep=True)
    learned["bigram_loss"] = learned.bigram_loss * 0 + 2.0 * float(ds.loss.sel(variant="fp32", weights="fp32"))
    by_name = {c.name: c for c in CLAIMS}
    r = by_name["ssd_int8_close_to_fp32"].evaluate(learned)
    assert r.competent and r.verdict != "control not competent"
    # the claims can fail: make the SSDi8 variant as bad as per-tensor
    broken = learned.copy(deep=True)
    for var in ("loss", "perplexity", "ssd_error", "loss_own", "seq_loss_own"):
        broken[var].loc[{"variant": "ssdi8"}] = broken[var].sel(variant="per_tensor").values
    for var in ("seq_loss_seeds", "seq_loss_seeds_outliers"):
        broken[var].loc[{"candidate": "ssdi8"}] = broken[var].sel(candidate="per_tensor").values
    for name in ("ssd_int8_close_to_fp32", "w8a8_close_to_fp32", "w8a8_int8_ssd_matches_input_only"):
        r = by_name[name].evaluate(broken)
        assert r.verdict in ("fails", "does not discriminate") and not r.passed
    assert by_name["correction_lowers_error"].evaluate(broken).verdict == "fails"
    # the model's own activations: no injected outliers, so the axis-aware SSD errors equal the injected run's at
    # float projections (a per-channel scale absorbs a channel's factor) while per tensor is no worse than there
    # on all n_eval sequences: the pairs read (the headline's candidates at W8A8, the float model, per tensor at
    # float weights); the others on the grid only (NaN loss, NaN off the grid)
    from lab.methods.ssdi8.measure import CANDIDATES, FULL_OWN

    read = {(v, "w8a8") for v in CANDIDATES} | set(FULL_OWN)
    assert ds.loss_own.dims == ("variant", "weights") and np.isfinite(ds.ssd_error_own).all()
    grid_n = Config.from_profile("ci").n_eval_grid
    for v in ds.variant.values:
        for w in ds.weights.values:
            own, seqs = ds.loss_own.sel(variant=v, weights=w), ds.seq_loss_own.sel(variant=v, weights=w)
            assert np.isfinite(seqs[:grid_n]).all()
            assert bool(np.isfinite(own)) == ((v, w) in read) == bool(np.isfinite(seqs).all()), (v, w)
    # the headline's comparison on every seed: the first seed's losses are the own-activation grid's, over all n_eval
    cfg = Config.from_profile("ci")
    assert ds.seq_loss_seeds.sizes == {"seed": cfg.n_seeds, "candidate": 5, "eval_seq": cfg.n_eval}
    np.testing.assert_array_equal(ds.seq_loss_seeds.isel(seed=0).sel(candidate="ssdi8"),
                                  ds.seq_loss_own.sel(variant="ssdi8", weights="w8a8"))
    assert not np.allclose(ds.seq_loss_seeds.isel(seed=1), ds.seq_loss_seeds.isel(seed=0))
    # the headline's: with the injected outliers, per sequence over all n_eval, every seed; the float candidate
    # (outliers are function-preserving) equals the own-activation one, the INT8 SSD per tensor does not
    out = ds.seq_loss_seeds_outliers
    assert out.sizes == ds.seq_loss_seeds.sizes and np.isfinite(out).all()
    np.testing.assert_allclose(out.sel(candidate="fp32"), ds.seq_loss_seeds.sel(candidate="fp32"), rtol=1e-4)
    assert not np.allclose(out.sel(candidate="per_tensor"), ds.seq_loss_seeds.sel(candidate="per_tensor"))
    on_grid = out.isel(seed=0, eval_seq=slice(0, cfg.n_eval_grid)).sel(candidate="ssdi8")  # the grid comes first
    assert float(on_grid.mean()) == pytest.approx(float(ds.loss.sel(variant="ssdi8", weights="w8a8")), rel=1e-5)
    assert len(head.per_seed) == cfg.n_seeds
    np.testing.assert_allclose(ds.ssd_error_own.sel(variant="axis_aware", weights="fp32"),
                               ds.ssd_error.sel(variant="axis_aware", weights="fp32"), rtol=1e-3)
    assert float(ds.ssd_error_own.sel(variant="per_tensor").mean()) < float(ds.ssd_error.sel(
        variant="per_tensor").mean())


def test_count_model_losses_by_hand():
    """'abab...' for training: the bigram knows what follows; evaluation 'abab' and 'abba'."""
    train = torch.tensor([97, 98] * 50)
    ev = torch.tensor([[97, 98, 97, 98], [97, 98, 98, 97]])
    uni, big = T.count_model_losses(T.Corpus(train, ev[:1], ev, {}, np.zeros(len(ev), int)))
    p_uni = 51 / (100 + T.VOCAB)  # add-one: 50 of each letter + 1, over 100 + VOCAB
    assert uni == pytest.approx(-math.log(p_uni))
    after_a, after_b = (50 + 1) / (50 + T.VOCAB), (49 + 1) / (49 + T.VOCAB)  # a->b 50 times, b->a 49 times
    surprise = [-math.log(after_a), -math.log(after_b), -math.log(after_a),  # a b a b
                -math.log(after_a), -math.log(1 / (49 + T.VOCAB)), -math.log(after_b)]  # a b b a: b->b unseen
    assert big == pytest.approx(np.mean(surprise))


@pytest.mark.parametrize("bias_share", [0.0, 0.25, 1.0])
def test_correction_drop_is_measured_against_its_ceiling(bias_share):
    """An error that is ``bias_share`` per-channel bias loses (1 - (1 - c)²) of that share at coefficient c: the
    claim's measure gives the share back, whatever c."""
    import xarray as xr

    from lab.methods.ssdi8.claims import correction_ceiling

    assert correction_ceiling(0.15) == pytest.approx(27.75) and correction_ceiling(1.0) == 100.0
    claim = next(c for c in CLAIMS if c.name == "correction_lowers_error")
    for coef in (0.15, 0.5):
        after = 1.0 - bias_share * correction_ceiling(coef) / 100
        err = np.array([[[1.0, 1.0]], [[after, after]], [[1.2, 1.2]]])  # (variant, weights, layer)
        ds = xr.Dataset({"ssd_error": (("variant", "weights", "layer"), err),
                         "ssd_error_full_correction": (("weights", "layer"), [[1.0 - bias_share] * 2])},
                        coords={"variant": ["axis_aware", "ssdi8", "shuffled"], "weights": ["w4a8"]},
                        attrs={"correction_weights": "w4a8", "correction_scale": coef})
        assert claim.measure(ds).value == pytest.approx(100 * bias_share)
        assert claim.passes(claim.measure(ds).value) == (bias_share > 0)
        assert claim.control(ds).value < 0


def test_live_table_and_activations():
    from lab.methods.ssdi8 import live, plots

    table = live.quant_table("ci")
    assert table.perplexity.shape == (len(M.VARIANTS), 3)
    assert math.isclose(table.attrs["fp32_perplexity"], float(table.perplexity.sel(variant="fp32", weights="fp32")))
    cfg = live.config("ci")
    x = live.activations("ci", "x", "channel")
    assert x.dims == ("channel", "sample") and x.sizes["channel"] == cfg.d_inner
    s = live.activations("ci", "states", "state", layer=1)
    assert s.sizes["state"] == cfg.d_state
    plots.activation_ranges(x), plots.activation_histogram(s, 0), plots.perplexity_bars(table)
    with pytest.raises(ConfigError, match="axis='group'"):
        live.activations("ci", "x", "group")
    with pytest.raises(ConfigError, match="layer=5"):
        live.activations("ci", "x", "channel", layer=5)
    assert dataclasses.is_dataclass(live.prepared(cfg))


def test_seed_trainings_in_worker_processes_give_the_weights_of_a_training_here(tmp_path, monkeypatch):
    """train_all trains every seed's missing language model side by side in worker processes (lab.core.parallel),
    into the weight cache; each is bit for bit the model trained in this process, a second call trains nothing and
    without the cache it does nothing."""
    monkeypatch.setenv("LAB_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("LAB_WORKERS", "2")
    monkeypatch.setattr(T, "SERIAL_BELOW_STEPS", 0)  # a pool even for ci's few steps
    cfg = Config.from_profile("ci", train_steps=3)
    done = T.train_all(cfg, progress=False)
    assert [r.name for r in done] == [f"Mamba-2 LM seed {cfg.seed + k}" for k in range(cfg.n_seeds)]
    assert all(r.ran for r in done) and not any(r.ran for r in T.train_all(cfg, progress=False))
    for k in range(cfg.n_seeds):
        seeded = dataclasses.replace(cfg, seed=cfg.seed + k)
        cached = T.trained_model(seeded, progress=False)
        here = T.trained_model(dataclasses.replace(seeded, use_cache=False), progress=False)
        assert cached.loaded and not here.loaded
        for (key, a), b in zip(cached.model.state_dict().items(), here.model.state_dict().values()):
            assert torch.equal(a, b), (k, key)
    assert T.train_all(dataclasses.replace(cfg, use_cache=False), progress=False) == []


def test_plan_trains_first_and_puts_each_measurement_where_it_ends_first():
    """The chains of worker steps: the trainings first (longest first, on the chain that ends first), then each
    measurement where it would end first, waiting for its model; a cached model (cost 0) is no step."""
    from lab.methods.ssdi8 import measure as ME

    assert ME.plan({0: 10, 1: 10, 2: 10}, {0: 6, 1: 3, 2: 3}, 2) == [
        [("train", 0), ("train", 2), ("measure", 2)], [("train", 1), ("measure", 0), ("measure", 1)]]
    assert ME.plan({0: 0, 1: 0, 2: 0}, {0: 6, 1: 3, 2: 3}, 2) == [[("measure", 0)], [("measure", 1), ("measure", 2)]]
    assert ME.plan({0: 10, 1: 0}, {0: 6, 1: 3}, 1) == [[("train", 0), ("measure", 0), ("measure", 1)]]


def test_measurements_in_worker_processes_equal_those_here(tmp_path, monkeypatch):
    """measure_all trains and measures every seed in worker processes (lab.core.parallel); each seed's arrays are
    bit for bit those measured here from the cached weights; without the cache it leaves the work to the caller."""
    from lab.methods.ssdi8 import measure as ME

    monkeypatch.setenv("LAB_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("LAB_WORKERS", "2")
    monkeypatch.setattr(ME, "SERIAL_BELOW", 0)  # a pool even for ci's few steps
    cfg = Config.from_profile("ci", train_steps=3)
    pooled = ME.measure_all(cfg, progress=False)
    assert set(pooled) == {cfg.seed + k for k in range(cfg.n_seeds)}
    for name, value in ME.measure_first(cfg).items():
        np.testing.assert_array_equal(pooled[cfg.seed][name], value, err_msg=name)
    for k in range(1, cfg.n_seeds):
        for a, b in zip(pooled[cfg.seed + k], ME.measure_seed(dataclasses.replace(cfg, seed=cfg.seed + k))):
            np.testing.assert_array_equal(a, b)
    assert ME.measure_all(dataclasses.replace(cfg, use_cache=False), progress=False) is None
