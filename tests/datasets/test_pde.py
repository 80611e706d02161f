"""Tests of lab.datasets.pde: solvers vs exact solutions, tendencies, data sets (the benchmark: tests/bench)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from lab.datasets.pde import (
    EQUATIONS,
    BurgersStepper,
    HeatStepper,
    KdVStepper,
    KolmogorovFlowStepper,
    KSStepper,
    NavierStokes2DStepper,
    advance,
    etdrk4_coefficients,
    kdv_soliton,
    ks_initial_condition,
    make_pde_dataset,
    make_stepper,
    random_sines,
    random_vorticity,
    rollout,
    taylor_green_vorticity,
    validate_solvers,
    velocity_from_vorticity,
)
from lab.datasets.pde import data as pde_data
from lab.datasets.pde.etdrk4 import stepping

TWO_PI = 2.0 * np.pi


# --------------------------------------------------------------------------- validation figures
@pytest.fixture(scope="module")
def figures() -> dict[str, float]:
    return validate_solvers()


@pytest.mark.parametrize(
    "key, bound",
    [
        ("kdv_soliton_max_error", 2e-4),  # brief: a correct ETDRK4 gets 5.9e-5
        ("kdv_soliton_float32_max_error", 1e-3),
        ("kdv_soliton_lpsda_max_error", 1e-5),
        ("burgers_cole_hopf_max_error", 1e-5),
        ("burgers_cole_hopf_nu001_max_error", 1e-4),
        ("heat_mode_decay_max_error", 1e-12),
        ("taylor_green_max_error", 1e-10),
        ("mean_drift_max", 1e-12),
    ],
)
def test_validation_errors_are_small(figures: dict[str, float], key: str, bound: float) -> None:
    assert np.isfinite(figures[key])
    assert figures[key] < bound, f"{key} = {figures[key]:.3e} >= {bound}"


def test_etdrk4_is_fourth_order(figures: dict[str, float]) -> None:
    # halving dt divides the error by ~2^4 = 16 (observed ~24, order ~4.6)
    assert 12.0 < figures["kdv_dt_halving_error_ratio"] < 40.0
    assert 3.6 < figures["kdv_convergence_order"] < 5.3


def test_validate_solvers_returns_floats(figures: dict[str, float]) -> None:
    assert all(isinstance(v, float) for v in figures.values())


# --------------------------------------------------------------------------- coefficients
def test_contour_coefficients_match_direct_formulas_and_stay_complex() -> None:
    h = 0.3
    lin = np.array([-40.0, -10.0 + 5.0j, 30.0j, 8.0 - 20.0j]) / h  # |hL| large: direct formulas are accurate
    c = etdrk4_coefficients(lin, h)
    z = h * lin
    direct = {
        "Q": h * (np.exp(z / 2) - 1) / z,
        "f1": h * (-4 - z + np.exp(z) * (4 - 3 * z + z**2)) / z**3,
        "f2": h * (2 + z + np.exp(z) * (z - 2)) / z**3,
        "f3": h * (-4 - 3 * z - z**2 + np.exp(z) * (4 - z)) / z**3,
    }
    for key, value in direct.items():
        np.testing.assert_allclose(c[key], value, rtol=1e-10, atol=1e-14)
    assert np.max(np.abs(c["f1"].imag)) > 1e-3  # the imaginary parts are kept
    # L = 0: the limits h/2, h/6, h/6, h/6 (no cancellation trouble)
    c0 = etdrk4_coefficients(np.zeros(1), h)
    np.testing.assert_allclose(
        [c0["Q"][0], c0["f1"][0], c0["f2"][0], c0["f3"][0]], [h / 2, h / 6, h / 6, h / 6], rtol=1e-12
    )


def test_kdv_coefficients_are_complex() -> None:
    st = KdVStepper(50.0, 64, 0.01)
    assert np.iscomplexobj(st.coefficients["f2"])
    assert np.max(np.abs(st.coefficients["f2"].imag)) > 0


# --------------------------------------------------------------------------- tendencies vs analytic derivatives
def _trig_1d(x: np.ndarray, L: float) -> tuple[np.ndarray, ...]:
    """u, u_x, u_xx, u_xxx, u_xxxx of a two-mode trigonometric function."""
    k1, k2 = TWO_PI / L, 3 * TWO_PI / L
    u = 0.7 * np.sin(k1 * x + 0.3) + 0.4 * np.cos(k2 * x - 1.0) + 0.1
    d1 = 0.7 * k1 * np.cos(k1 * x + 0.3) - 0.4 * k2 * np.sin(k2 * x - 1.0)
    d2 = -0.7 * k1**2 * np.sin(k1 * x + 0.3) - 0.4 * k2**2 * np.cos(k2 * x - 1.0)
    d3 = -0.7 * k1**3 * np.cos(k1 * x + 0.3) + 0.4 * k2**3 * np.sin(k2 * x - 1.0)
    d4 = 0.7 * k1**4 * np.sin(k1 * x + 0.3) + 0.4 * k2**4 * np.cos(k2 * x - 1.0)
    return u, d1, d2, d3, d4


@pytest.mark.parametrize("equation", ["burgers", "kdv", "ks"])
def test_1d_tendency_matches_analytic_right_hand_side(equation: str) -> None:
    L, N, dt = 20.0, 64, 1e-6
    if equation == "burgers":
        st = BurgersStepper(L, N, dt, nu=0.3, convection=1.5)
    elif equation == "kdv":
        st = KdVStepper(L, N, dt, convection=2.0, dispersion=0.5)
    else:
        st = KSStepper(L, N, dt)
    u, d1, d2, d3, d4 = _trig_1d(st.grid, L)
    if equation == "burgers":
        rhs = -1.5 * u * d1 + 0.3 * d2
    elif equation == "kdv":
        rhs = -2.0 * u * d1 - 0.5 * d3
    else:
        rhs = -u * d1 - d2 - d4
    tendency = (st(u[None])[0] - u) / dt
    np.testing.assert_allclose(tendency, rhs, atol=1e-4 * np.max(np.abs(rhs)))


def test_navier_stokes_tendency_matches_analytic_right_hand_side() -> None:
    L, N, dt, nu, drag = TWO_PI, 32, 1e-6, 0.05, 0.2
    st = KolmogorovFlowStepper(L, N, dt, nu=nu, drag=drag, forcing_mode=2, forcing_amplitude=0.7)
    g = st.grid
    y, x = np.meshgrid(g, g, indexing="ij")
    # w = sum of modes a sin(p x + q y + phi); psi = w / (p^2 + q^2)
    modes = [(1, 0, 1.0, 0.1), (0, 2, 0.5, 0.7), (1, 1, 0.8, -0.4), (2, -1, 0.3, 1.3)]
    w = np.zeros_like(x)
    wx, wy, u, v = (np.zeros_like(x) for _ in range(4))
    lap = np.zeros_like(x)
    for p, q, a, phi in modes:
        s, c = np.sin(p * x + q * y + phi), np.cos(p * x + q * y + phi)
        k2 = p * p + q * q
        w += a * s
        wx += a * p * c
        wy += a * q * c
        lap += -k2 * a * s
        u += a * q * c / k2  # psi_y
        v += -a * p * c / k2  # -psi_x
    forcing = -0.7 * 2 * np.cos(2 * y)
    rhs = -(u * wx + v * wy) + nu * lap - drag * w + forcing
    tendency = (st(w[None])[0] - w) / dt
    np.testing.assert_allclose(tendency, rhs, atol=1e-4 * np.max(np.abs(rhs)))
    ux, vx = velocity_from_vorticity(w, L)
    np.testing.assert_allclose(ux, u, atol=1e-12)
    np.testing.assert_allclose(vx, v, atol=1e-12)


# --------------------------------------------------------------------------- Navier-Stokes specifics
def test_taylor_green_velocity_and_decay() -> None:
    N = 32
    g = np.arange(N) * TWO_PI / N
    y, x = np.meshgrid(g, g, indexing="ij")
    w0 = taylor_green_vorticity(N)
    u, v = velocity_from_vorticity(w0, TWO_PI)
    np.testing.assert_allclose(u, np.sin(x) * np.cos(y), atol=1e-13)
    np.testing.assert_allclose(v, -np.cos(x) * np.sin(y), atol=1e-13)
    st = NavierStokes2DStepper(TWO_PI, N, 0.05, nu=0.02)
    w = advance(st, w0[None], 20)[0]
    np.testing.assert_allclose(w, taylor_green_vorticity(N, t=1.0, nu=0.02), atol=1e-12)


def test_kolmogorov_laminar_flow_approaches_its_steady_state() -> None:
    # from rest, the forced shear flow has no advection: w(t) = w_s (1 - exp(-(nu k^2 + drag) t))
    N, nu, drag, A, n_f = 32, 0.05, 0.1, 1.0, 3
    st = KolmogorovFlowStepper(TWO_PI, N, 0.1, nu=nu, drag=drag, forcing_mode=n_f, forcing_amplitude=A)
    y = st.grid[:, None] * np.ones((1, N))
    steady = -A * n_f * np.cos(n_f * y) / (nu * n_f**2 + drag)
    w = advance(st, np.zeros((1, N, N)), 20)[0]
    expected = steady * (1 - math.exp(-(nu * n_f**2 + drag) * 2.0))
    np.testing.assert_allclose(w, expected, atol=1e-12)
    np.testing.assert_allclose(st(steady[None])[0], steady, atol=1e-12)


def test_random_vorticity_is_band_limited_with_unit_velocity() -> None:
    w = random_vorticity(np.random.default_rng(0), 3, 32, TWO_PI, min_mode=2.0, max_mode=5.0, velocity_rms=1.5)
    assert w.shape == (3, 32, 32)
    np.testing.assert_allclose(w.mean(axis=(-2, -1)), 0.0, atol=1e-12)
    u, v = velocity_from_vorticity(w, TWO_PI)
    np.testing.assert_allclose(np.sqrt(np.mean(u**2 + v**2, axis=(-2, -1))), 1.5, rtol=1e-12)
    spec = np.abs(np.fft.rfft2(w))
    my = np.fft.fftfreq(32, 1 / 32)[:, None]
    mx = np.arange(17)[None, :]
    r = np.sqrt(mx**2 + my**2)
    assert np.max(spec[:, (r < 2.0) | (r > 5.0)]) < 1e-10


def test_navier_stokes_rotation_equivariance() -> None:
    # decaying NS commutes with a rotation by 90 degrees (the vorticity is a scalar under rotation)
    N = 32
    st = NavierStokes2DStepper(TWO_PI, N, 0.05, nu=1e-3)
    w0 = random_vorticity(np.random.default_rng(1), 1, N, max_mode=6.0)

    def rot(w: np.ndarray) -> np.ndarray:  # (x, y) -> (-y, x) on the grid x_j = j h
        return np.roll(np.rot90(w, 1, axes=(-2, -1)), 1, axis=-2)

    np.testing.assert_allclose(advance(st, rot(w0), 10), rot(advance(st, w0, 10)), atol=1e-11)


# --------------------------------------------------------------------------- API behaviour
def test_dtypes_types_and_shapes() -> None:
    st = KSStepper(64.0, 64, 0.1)
    u64 = random_sines(np.random.default_rng(0), 3, 64, 64.0)
    u32 = u64.astype(np.float32)
    out64, out32 = st(u64), st(u32)
    assert out64.dtype == np.float64 and out32.dtype == np.float32 and out32.shape == (3, 64)
    np.testing.assert_allclose(out32, out64, atol=1e-5)
    t = st(torch.from_numpy(u32))
    assert isinstance(t, torch.Tensor) and t.dtype == torch.float32
    traj = rollout(st, u32, 5)
    assert traj.shape == (3, 6, 64) and traj.dtype == np.float32
    np.testing.assert_array_equal(traj[:, 0], u32)
    assert rollout(st, u32, 5, include_init=False).shape == (3, 5, 64)
    assert rollout(st, u32, 0).shape == (3, 1, 64)
    # substeps: frames every 2 steps
    np.testing.assert_allclose(rollout(st, u64, 3, substeps=2)[:, -1], advance(st, u64, 6), atol=1e-12)
    # a generic callable goes through the same interface
    generic = rollout(lambda u: st(u), u64, 4)
    np.testing.assert_allclose(generic, rollout(st, u64, 4), atol=1e-12)
    assert isinstance(rollout(st, torch.from_numpy(u64), 2), torch.Tensor)
    # the torch thread count is restored
    assert torch.get_num_threads() >= 1


def test_rollout_progress_bar_runs() -> None:
    st = HeatStepper(1.0, 16, 0.1)
    assert rollout(st, np.zeros((1, 16)), 3, progress=True).shape == (1, 4, 16)


def test_dealiasing_mask_and_wavenumbers() -> None:
    st = BurgersStepper(TWO_PI, 256, 0.01)
    assert int(st.dealias_mask.sum()) == 86  # modes 0..85 (2/3 of 128)
    (k,) = st.wavenumbers(odd_derivative=True)
    assert k[-1] == 0.0 and st.wavenumbers()[0][-1] == pytest.approx(128.0)
    ns = NavierStokes2DStepper(TWO_PI, 16, 0.01)
    assert ns.dealias_mask.shape == (16, 9) and int(ns.dealias_mask.sum()) == 11 * 6


def test_ks_warmup_reaches_the_attractor_and_is_seeded() -> None:
    st = KSStepper(64.0, 128, 0.25)
    a = ks_initial_condition(st, np.random.default_rng(5), 2, warmup_steps=200)
    b = ks_initial_condition(st, np.random.default_rng(5), 2, warmup_steps=200)
    np.testing.assert_array_equal(a, b)
    # the attractor of L = 64 has O(1) amplitude and a rough spectrum; the sines had only modes 1-2
    assert 1.0 < np.abs(a).max() < 5.0
    spec = np.abs(np.fft.rfft(a, axis=-1))
    assert spec[:, 6:12].max() > 1e-2 * spec.max()


def test_random_sines_follow_lpsda() -> None:
    u = random_sines(np.random.default_rng(0), 50, 64, 10.0, num_terms=10, amplitude=0.5, max_wavenumber=2)
    assert u.shape == (50, 64)
    assert np.abs(u).max() <= 5.0
    spec = np.abs(np.fft.rfft(u, axis=-1))
    assert spec[:, 3:].max() < 1e-10 and spec[:, 0].max() < 1e-10


def test_kdv_soliton_default_convention() -> None:
    # LPSDA convention u_t + u u_x + u_xxx = 0: soliton 3c sech^2(sqrt(c)/2 (x - ct))
    st = KdVStepper(50.0, 256, 0.01)
    x = st.grid
    u0 = kdv_soliton(x, 0.0, speed=1.0, x0=25.0, domain_extent=50.0)
    assert u0.max() == pytest.approx(3.0)
    u = advance(st, u0[None], 400)[0]
    np.testing.assert_allclose(u, kdv_soliton(x, 4.0, speed=1.0, x0=25.0, domain_extent=50.0), atol=1e-6)


# --------------------------------------------------------------------------- bad inputs
@pytest.mark.parametrize(
    "make, field, value",
    [
        (lambda: KSStepper(64.0, -3, 0.1), "num_points", "-3"),
        (lambda: KSStepper(64.0, 2.5, 0.1), "num_points", "2.5"),
        (lambda: KSStepper(64.0, 64, float("nan")), "dt", "nan"),
        (lambda: BurgersStepper(1.0, 64, float("inf")), "dt", "inf"),
        (lambda: BurgersStepper(1.0, 64, -0.1), "dt", "-0.1"),
        (lambda: BurgersStepper(-1.0, 64, 0.1), "domain_extent", "-1.0"),
        (lambda: BurgersStepper(1.0, 64, 0.1, nu=-1.0), "nu", "-1.0"),
        (lambda: NavierStokes2DStepper(1.0, 16, 0.1, forcing_mode=9), "forcing_mode", "9"),
        (lambda: make_stepper("navier", 1.0, 16, 0.1), "equation", "'navier'"),
        (lambda: make_pde_dataset("heat_eq", n_traj=1), "equation", "'heat_eq'"),
        (lambda: make_pde_dataset("ks", n_traj=0), "n_traj", "0"),
        (lambda: make_pde_dataset("ks", num_points=-8), "num_points", "-8"),
        (lambda: make_pde_dataset("ks", dt=float("nan")), "dt", "nan"),
        (lambda: make_pde_dataset("ks", dtype="float16"), "dtype", "'float16'"),
        (lambda: make_pde_dataset("burgers", coefficients={"viscosity": 1.0}), "coefficients", "viscosity"),
    ],
)
def test_bad_inputs_raise_value_error_naming_field_and_value(make, field: str, value: str) -> None:
    """One message style across the lab (lab.checks): ``name=value is not allowed; allowed: ...``."""
    with pytest.raises(ValueError) as info:
        make()
    message = str(info.value)
    assert message.startswith(f"{field}=") and value in message.split(" is not allowed")[0], message
    assert " is not allowed; allowed: " in message, message


def test_unknown_equation_lists_the_allowed_names() -> None:
    with pytest.raises(ValueError) as info:
        make_pde_dataset("navier-stokes")
    for name in EQUATIONS:
        assert repr(name) in str(info.value)


def test_wrong_state_shape_or_dtype_is_refused() -> None:
    st = KSStepper(64.0, 64, 0.1)
    with pytest.raises(ValueError, match=r"u must have shape \('batch', 64\), got \(64,\)"):
        st(np.zeros(64))
    with pytest.raises(ValueError, match="float32 or float64"):
        st(np.zeros((1, 64), dtype=np.int64))


# --------------------------------------------------------------------------- data sets
def test_make_pde_dataset_1d_is_cached_and_matches_the_solver(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kw = dict(
        n_traj=3, n_steps=4, num_points=32, dt=0.5, substeps=2, warmup_steps=3, seed=7, root=tmp_path, progress=False
    )
    ds = make_pde_dataset("ks", **kw)
    assert ds["u"].dims == ("traj", "time", "x") and ds["u"].shape == (3, 5, 32)
    assert ds["u"].dtype == np.float32
    np.testing.assert_allclose(ds["time"].values, np.arange(5) * 0.5)
    np.testing.assert_allclose(ds["x"].values, np.arange(32) * 64.0 / 32)
    assert ds.attrs["equation"] == "ks" and ds.attrs["solver_dt"] == 0.25 and ds.attrs["warmup_time"] == 1.5
    assert "u_xxxx" in ds.attrs["pde"]
    files = list(tmp_path.glob("pde-ks-*.nc"))
    assert len(files) == 1 and not list(tmp_path.glob("*.tmp"))
    # same result from the solver directly
    st = KSStepper(64.0, 32, 0.25)
    u0 = random_sines(np.random.default_rng(7), 3, 32, 64.0).astype(np.float32)
    expected = rollout(st, advance(st, u0, 6), 4, substeps=2)
    np.testing.assert_allclose(ds["u"].values, expected, atol=1e-6)

    # second call: read from the cache, no solving
    def no_build(*args, **kwargs):
        raise AssertionError("should have been read from the cache")

    monkeypatch.setattr(pde_data, "_build", no_build)
    again = make_pde_dataset("ks", **kw)
    assert again.identical(ds)
    # a different seed is a different data set (and would need building)
    with pytest.raises(AssertionError, match="cache"):
        make_pde_dataset("ks", **{**kw, "seed": 8})


def test_make_pde_dataset_2d_and_float64(tmp_path: Path) -> None:
    ds = make_pde_dataset(
        "kolmogorov",
        n_traj=2,
        n_steps=3,
        num_points=16,
        dt=0.1,
        substeps=2,
        dtype="float64",
        coefficients={"forcing_mode": 2},
        root=tmp_path,
        progress=True,
    )
    w = ds["vorticity"]
    assert w.dims == ("traj", "time", "y", "x") and w.shape == (2, 4, 16, 16) and w.dtype == np.float64
    assert ds.attrs["state_variable"] == "vorticity"
    assert np.all(np.isfinite(w.values))
    np.testing.assert_allclose(w.mean(dim=("x", "y")).values, 0.0, atol=1e-12)
    nocache = make_pde_dataset(
        "kolmogorov",
        n_traj=2,
        n_steps=3,
        num_points=16,
        dt=0.1,
        substeps=2,
        dtype="float64",
        coefficients={"forcing_mode": 2},
        cache=False,
        progress=False,
    )
    np.testing.assert_array_equal(nocache["vorticity"].values, w.values)


def test_truncated_dataset_file_is_regenerated(tmp_path: Path) -> None:
    kw = dict(n_traj=2, n_steps=2, num_points=16, root=tmp_path, progress=False)
    ds = make_pde_dataset("burgers", **kw)
    (path,) = tmp_path.glob("pde-burgers-*.nc")
    with open(path, "r+b") as f:
        f.truncate(path.stat().st_size // 3)
    with pytest.warns(RuntimeWarning, match="rejected"):
        again = make_pde_dataset("burgers", **kw)
    np.testing.assert_array_equal(again["u"].values, ds["u"].values)


def test_every_equation_generates(tmp_path: Path) -> None:
    for equation in EQUATIONS:
        n = 16 if EQUATIONS[equation]["dims"] == 2 else 32
        ds = make_pde_dataset(
            equation, n_traj=1, n_steps=2, num_points=n, warmup_steps=1, cache=False, progress=False
        )
        var = ds.attrs["state_variable"]
        assert np.all(np.isfinite(ds[var].values)), equation


@pytest.mark.parametrize("substeps, include_init", [(1, True), (2, False)])
def test_rollout_matches_a_plain_loop_of_fourier_steps(substeps: int, include_init: bool) -> None:
    """The rollout gives, bit for bit, the frames of a plain loop of Fourier-space steps (torch path, not fused) with
    one inverse transform per frame."""
    stepper = KSStepper(22.0, 64, 0.25)
    u0 = random_sines(np.random.default_rng(5), 3, 64, 22.0, dtype=np.float32)
    traj = rollout(stepper, u0, 70, include_init=include_init, substeps=substeps)
    frames = [u0] if include_init else []
    stepper.fused = False
    with stepping():
        v = stepper.to_fourier(torch.from_numpy(u0))
        for _ in range(70):
            for _ in range(substeps):
                v = stepper.step_fourier(v)
            frames.append(stepper.from_fourier(v).numpy())
    np.testing.assert_array_equal(traj, np.stack(frames, axis=1))
