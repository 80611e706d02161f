"""The systems of lab.datasets.systems against known behaviour: the linear system's closed form and its AR(1) input,
the RLC circuit's inductor and its linear regime's resonance, the Duffing oscillator's linear limit and hardening,
the statsmodels series, the cache and bad input."""

import math

import numpy as np
import pytest
import scipy.signal

from lab.checks import ConfigError
from lab.datasets import systems as S


def test_linear_system_matches_its_closed_form():
    a, b = 0.8, 0.5
    u, y = S.linear_system(300, a=a, b=b, seed=3)
    t = np.arange(300)
    closed = np.array([sum(a ** (k - 1 - j) * b * u[j, 0] for j in range(k)) for k in t])
    np.testing.assert_allclose(y[:, 0], closed, atol=1e-10)
    # the same as a filter b z^-1 / (1 - a z^-1)
    np.testing.assert_allclose(y[:, 0], scipy.signal.lfilter([0, b], [1, -a], u[:, 0]), atol=1e-10)
    assert y[0, 0] == 0.0  # from rest


def test_linear_system_input_is_the_stated_ar1_process():
    u, _ = S.linear_system(200_000, rho=0.9, seed=1)
    u = u[:, 0]
    assert abs(u.var() - 1.0) < 0.05
    assert abs(np.corrcoef(u[1:], u[:-1])[0, 1] - 0.9) < 0.01
    w, _ = S.linear_system(200_000, rho=0.0, seed=1)
    assert abs(np.corrcoef(w[1:, 0], w[:-1, 0])[0, 1]) < 0.01


def test_rlc_inductance_saturates_as_stated():
    L0 = S.RLC_L0
    assert S.rlc_inductance(0.0) == pytest.approx(L0 * (0.9 * (math.atan(25) / math.pi + 0.5) + 0.1))
    assert S.rlc_inductance(5.0) == pytest.approx(L0 * (0.9 * 0.5 + 0.1))
    assert S.rlc_inductance(1e6) == pytest.approx(0.1 * L0, rel=1e-4)
    assert S.rlc_inductance(-3.0) == S.rlc_inductance(3.0)


def test_rlc_small_signal_rings_at_the_linear_resonance():
    """At small currents L ≈ L(0): a series RLC whose free response rings at ω_d = sqrt(1/(LC) - (R/2L)²) and
    decays as exp(-R t / 2L). An input pulse then silence: the voltage's zero crossings and decay match."""
    n = 4000
    u, y = S.rlc_circuit(n, seed=0, std=1e-3)  # tiny input: i far below the 5 A knee
    L = float(S.rlc_inductance(0.0))
    alpha = S.RLC_R / (2 * L)
    wd = math.sqrt(1 / (L * S.RLC_C) - alpha**2)
    v = y[:, 0]
    # the linear model driven by the same held input, simulated exactly (zero-order hold)
    A = np.array([[0, 1 / S.RLC_C], [-1 / L, -S.RLC_R / L]])
    B = np.array([[0], [1 / L]])
    Ad, Bd, *_ = scipy.signal.cont2discrete((A, B, np.eye(2), np.zeros((2, 1))), S.RLC_DT, method="zoh")
    x, yl = np.zeros(2), np.empty((n, 2))
    for k in range(n):
        yl[k] = x
        x = Ad @ x + Bd[:, 0] * u[k, 0]
    scale = np.abs(yl[:, 0]).max()
    assert np.abs(v - yl[:, 0]).max() < 1e-3 * scale
    assert wd / (2 * math.pi) == pytest.approx(43.3e3, rel=0.02)  # the circuit's small-signal resonance


def test_rlc_is_nonlinear_at_the_benchmark_amplitude():
    u, y = S.rlc_circuit(3000, seed=2)
    u2, y2 = S.rlc_circuit(3000, seed=2, std=160.0)
    assert np.allclose(u2, 2 * u)
    assert np.abs(y[:, 1]).max() > 5.0  # currents cross the inductor's 5 A knee
    assert np.abs(y2 - 2 * y).max() > 0.1 * np.abs(y2).max()  # no superposition


def test_duffing_linear_limit_and_hardening():
    u, y = S.duffing_oscillator(4000, seed=0, alpha=0.0, rms=0.01)
    u2, y2 = S.duffing_oscillator(4000, seed=0, alpha=0.0, rms=0.02)
    np.testing.assert_allclose(y2, 2 * y, atol=1e-9)  # linear without the cubic term
    # the linear oscillator matches the exact zero-order-hold discretisation of ÿ + 2ζω0 ẏ + ω0² y = u
    w0, zeta = 2 * math.pi * 0.06, 0.05
    Ad, Bd, *_ = scipy.signal.cont2discrete((np.array([[0, 1], [-w0**2, -2 * zeta * w0]]), np.array([[0], [1]]),
                                             np.eye(2), np.zeros((2, 1))), 1.0, method="zoh")
    x, ref = np.zeros(2), np.empty(4000)
    for k in range(4000):
        ref[k] = x[0]
        x = Ad @ x + Bd[:, 0] * u[k, 0]
    np.testing.assert_allclose(y[:, 0], ref, atol=1e-5 * np.abs(ref).max())
    # the cubic term: negligible at small amplitude, a hardening spring (smaller response) at large amplitude
    _, tiny_lin = S.duffing_oscillator(4000, seed=0, alpha=0.0, rms=1e-3)
    _, tiny = S.duffing_oscillator(4000, seed=0, rms=1e-3)
    assert np.abs(tiny - tiny_lin).max() < 1e-2 * np.abs(tiny_lin).max()
    _, big_lin = S.duffing_oscillator(4000, seed=0, alpha=0.0, rms=1.0)
    _, big = S.duffing_oscillator(4000, seed=0, rms=1.0)
    assert big.std() < 0.8 * big_lin.std()


def test_statsmodels_series_and_forecasting_splits():
    s = S.statsmodels_series("sunspots")
    assert len(s) == 309 and s[0] == 5.0
    sp = S.load_system("sunspots", 0, 0, 0, cache=False)
    total = sum(len(sp.y[k]) for k in S.SPLITS)
    assert total == 308
    np.testing.assert_array_equal(sp.u["train"][1:], sp.y["train"][:-1])  # input = the previous value
    assert sp.u["val"][0, 0] == sp.y["train"][-1, 0]  # consecutive stretches
    c = S.statsmodels_series("co2")
    assert np.all(np.isfinite(c)) and abs(np.mean(c)) < 0.1


def test_load_system_is_cached_and_seeded(tmp_path):
    a = S.load_system("linear", 50, 20, 20, seed=1, root=tmp_path)
    b = S.load_system("linear", 50, 20, 20, seed=1, root=tmp_path)
    c = S.load_system("linear", 50, 20, 20, seed=2, root=tmp_path)
    assert len(list(tmp_path.glob("system-linear-*.nc"))) == 2
    np.testing.assert_array_equal(a.u["train"], b.u["train"])
    assert not np.array_equal(a.u["train"], c.u["train"])
    assert not np.array_equal(a.u["train"][:20], a.u["val"])  # independent realisations per split
    assert a.n_in == 1 and a.n_out == 1
    assert S.load_system("rlc", 20, 10, 10, cache=False).n_out == 2


def test_bad_input_names_the_field():
    with pytest.raises(ConfigError, match=r"system='pendulum' is not allowed; allowed: one of 'linear'"):
        S.load_system("pendulum", 10, 10, 10)
    with pytest.raises(ConfigError, match="n_train=1"):
        S.load_system("rlc", 1, 10, 10)
    with pytest.raises(ConfigError, match="n_train=300"):
        S.load_system("sunspots", 300, 10, 10)
    with pytest.raises(ConfigError, match="a=1.0"):
        S.linear_system(10, a=1.0)
