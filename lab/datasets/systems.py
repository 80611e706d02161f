r"""Input-output dynamical systems for system identification and forecasting, one function per system, cached.

Every system gives an input sequence ``u`` ``(T, n_in)`` and an output sequence ``y`` ``(T, n_out)`` sampled at a
fixed rate, started from rest (zero state); independent realisations of the input come from independent seeds. The
benchmarks of the truncated-BPTT paper (arXiv 2602.10911) are downloaded at run time upstream, which the lab cannot
do, so they are simulated here:

* :func:`linear_system`: the one-state system ``x_{t+1} = a x_t + b u_t``, ``y_t = x_t``, a Gaussian AR(1) input. Its
  output has the closed form ``y_t = Σ_{k<t} a^{t-1-k} b u_k`` (the tests check it): the seconds-long case.
* :func:`rlc_circuit`: the nonlinear series RLC circuit of the system-identification literature (Forgione & Piga's
  benchmark, used by the paper): ``C dv/dt = i``, ``L(i) di/dt = u - v - R i`` with the saturating inductor
  ``L(i) = L0 [0.9 (arctan(-5 (|i| - 5)) / π + 0.5) + 0.1]``, ``R = 3 Ω``, ``L0 = 50 µH``, ``C = 270 nF``, sampled
  every ``0.5 µs``; input: Gaussian noise of 80 V standard deviation low-passed at 150 kHz (our choice of the
  input's band: the benchmark's own file is not available offline), held between samples; outputs ``(v, i)``
  (two outputs, as in the paper). RK4 with 4 sub-steps per sample.
* :func:`duffing_oscillator`: a Silverbox-like Duffing oscillator ``ÿ + 2 ζ ω0 ẏ + ω0² (y + α y³) = u`` in sample
  units (``ω0 = 2π · 0.06`` rad per sample, ``ζ = 0.05``, ``α = 1``), driven by a random-phase odd multisine
  (the Silverbox excitation kind) of unit RMS up to 0.2 cycles per sample; output the displacement. Our constants:
  the Silverbox is an electronic Duffing circuit whose parameters are not published.
* :func:`statsmodels_series`: a one-step forecasting problem from a series shipped with statsmodels: ``sunspots``
  (yearly sunspot activity, 1700-2008) or ``co2`` (weekly Mauna Loa CO2, 1958-2001, gaps interpolated, first
  differences since the trend cannot be standardised away). Input ``u_t = s_{t-1}``, output ``y_t = s_t``; the splits
  are consecutive stretches of the one series (train, then validation, then test).

:func:`load_system` builds the train, validation and test sequences of a system by name, checked (an unknown system
or a bad length raises :class:`~lab.checks.ConfigError`) and cached by :func:`lab.cache.cached_dataset`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import xarray as xr

from lab.cache import cached_dataset
from lab.checks import bad_value, check_choice, check_int, check_real

__all__ = ["SPLITS", "SYSTEMS", "VERSION", "Splits", "duffing_oscillator", "linear_system", "load_system",
           "rlc_circuit", "rlc_inductance", "statsmodels_series"]

#: bump when a generator here changes its output (invalidates the cache)
VERSION = 1
SPLITS = ("train", "val", "test")

# the nonlinear RLC circuit's constants (SI units)
RLC_R, RLC_L0, RLC_C, RLC_DT = 3.0, 50e-6, 270e-9, 0.5e-6


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(check_int("seed", seed, 0))


def linear_system(n: int, *, a: float = 0.95, b: float = 1.0, rho: float = 0.9,
                  seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``x_{t+1} = a x_t + b u_t``, ``y_t = x_t``, ``x_0 = 0``; the input a stationary Gaussian AR(1) process
    ``u_t = ρ u_{t-1} + sqrt(1 - ρ²) e_t`` of unit variance (``ρ = 0``: white).

    A coloured input makes the window's unknown initial state correlate with the window's own inputs, so the
    best predictor of the first outputs from a zero state is *not* the system itself: the case burn-in is for.

    Arguments:
        n: samples. a: the pole, ``|a| < 1``. b: the input gain. rho: the input's correlation, ``|ρ| < 1``.
    Returns:
        ``u`` ``(n, 1)``, ``y`` ``(n, 1)``.
    """
    n = check_int("n", n, 1)
    a = check_real("a", a, -1.0, 1.0, lo_open=True, hi_open=True)
    rho = check_real("rho", rho, -1.0, 1.0, lo_open=True, hi_open=True)
    e = _rng(seed).standard_normal(n)
    u = np.empty(n)
    u[0] = e[0]
    for t in range(1, n):
        u[t] = rho * u[t - 1] + math.sqrt(1 - rho**2) * e[t]
    x, y = 0.0, np.empty(n)
    for t in range(n):
        y[t] = x
        x = a * x + b * u[t]
    return u[:, None], y[:, None]


def rlc_inductance(i: np.ndarray | float, L0: float = RLC_L0):
    """The saturating inductor ``L(i) = L0 [0.9 (arctan(-5 (|i| - 5)) / π + 0.5) + 0.1]``: ``L0`` near zero current,
    ``0.1 L0`` far above 5 A."""
    return L0 * (0.9 * (np.arctan(-5.0 * (np.abs(i) - 5.0)) / np.pi + 0.5) + 0.1)


def _lowpass_noise(rng: np.random.Generator, n: int, std: float, cutoff: float) -> np.ndarray:
    """Gaussian noise with a flat spectrum below ``cutoff`` (cycles per sample) and none above, of standard
    deviation ``std``."""
    spec = np.fft.rfft(rng.standard_normal(n))
    spec[np.fft.rfftfreq(n) > cutoff] = 0.0
    x = np.fft.irfft(spec, n)
    return x * (std / max(float(x.std()), 1e-12))


def rlc_circuit(n: int, *, seed: int = 0, std: float = 80.0, bandwidth: float = 150e3,
                substeps: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """The nonlinear series RLC circuit (module docstring), from rest.

    Arguments:
        n: samples (0.5 µs apart). std: input standard deviation (V). bandwidth: input cut-off (Hz).
        substeps: RK4 steps per sample (the input is held over a sample).
    Returns:
        ``u`` ``(n, 1)`` in V; ``y`` ``(n, 2)``: capacitor voltage (V) and inductor current (A).
    """
    n = check_int("n", n, 1)
    check_int("substeps", substeps, 1)
    u = _lowpass_noise(_rng(seed), n, std, bandwidth * RLC_DT)
    h = RLC_DT / substeps
    v, i = 0.0, 0.0
    y = np.empty((n, 2))

    def f(v: float, i: float, ut: float) -> tuple[float, float]:
        L = RLC_L0 * (0.9 * (math.atan(-5.0 * (abs(i) - 5.0)) / math.pi + 0.5) + 0.1)
        return i / RLC_C, (ut - v - RLC_R * i) / L

    for t in range(n):
        y[t] = v, i
        ut = float(u[t])
        for _ in range(substeps):
            k1 = f(v, i, ut)
            k2 = f(v + 0.5 * h * k1[0], i + 0.5 * h * k1[1], ut)
            k3 = f(v + 0.5 * h * k2[0], i + 0.5 * h * k2[1], ut)
            k4 = f(v + h * k3[0], i + h * k3[1], ut)
            v += h / 6 * (k1[0] + 2 * k2[0] + 2 * k3[0] + k4[0])
            i += h / 6 * (k1[1] + 2 * k2[1] + 2 * k3[1] + k4[1])
    return u[:, None], y


def duffing_oscillator(n: int, *, seed: int = 0, omega0: float = 2 * math.pi * 0.06, zeta: float = 0.05,
                       alpha: float = 1.0, f_max: float = 0.2, rms: float = 1.0,
                       substeps: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """The Duffing oscillator ``ÿ + 2 ζ ω0 ẏ + ω0² (y + α y³) = u`` in sample units, from rest, driven by a
    random-phase odd multisine (odd harmonics of ``1/n`` up to ``f_max`` cycles per sample, equal amplitudes).

    Arguments:
        n: samples. omega0: natural frequency (rad per sample). zeta: damping ratio. alpha: cubic stiffness.
        f_max: the multisine's band (cycles per sample). rms: its RMS value. substeps: RK4 steps per sample.
    Returns:
        ``u`` ``(n, 1)``, ``y`` ``(n, 1)`` (displacement).
    """
    n = check_int("n", n, 2)
    check_real("f_max", f_max, 0.0, 0.5, lo_open=True)
    rng = _rng(seed)
    k = np.arange(1, int(f_max * n) + 1, 2)  # odd harmonics of the record length
    t = np.arange(n)
    phases = rng.uniform(0, 2 * np.pi, len(k))
    u = np.cos(2 * np.pi * np.outer(t, k) / n + phases).sum(axis=1)
    u *= rms / max(float(np.sqrt(np.mean(u**2))), 1e-12)
    h = 1.0 / substeps
    w2, c = omega0**2, 2 * zeta * omega0
    p, q = 0.0, 0.0  # displacement, velocity
    y = np.empty(n)
    for s in range(n):
        y[s] = p
        ut = float(u[s])
        for _ in range(substeps):
            a1 = ut - c * q - w2 * (p + alpha * p**3)
            p2, q2 = p + 0.5 * h * q, q + 0.5 * h * a1
            a2 = ut - c * q2 - w2 * (p2 + alpha * p2**3)
            p3, q3 = p + 0.5 * h * q2, q + 0.5 * h * a2
            a3 = ut - c * q3 - w2 * (p3 + alpha * p3**3)
            p4, q4 = p + h * q3, q + h * a3
            a4 = ut - c * q4 - w2 * (p4 + alpha * p4**3)
            p += h / 6 * (q + 2 * q2 + 2 * q3 + q4)
            q += h / 6 * (a1 + 2 * a2 + 2 * a3 + a4)
    return u[:, None], y[:, None]


STATSMODELS_SERIES = ("sunspots", "co2")


def statsmodels_series(name: str) -> np.ndarray:
    """The whole series ``(T,)``: ``sunspots`` (309 years) or ``co2`` (2283 weekly first differences)."""
    check_choice("name", name, STATSMODELS_SERIES)
    import statsmodels.api as sm

    if name == "sunspots":
        return sm.datasets.sunspots.load_pandas().data["SUNACTIVITY"].to_numpy(float)
    co2 = sm.datasets.co2.load_pandas().data["co2"].interpolate(limit_direction="both").to_numpy(float)
    return np.diff(co2)


@dataclass(frozen=True)
class SystemSpec:
    """A system of :data:`SYSTEMS`: how to simulate ``n`` samples from a seed (None for a fixed series)."""

    simulate: Callable[..., tuple[np.ndarray, np.ndarray]] | None
    doc: str
    forecasting: bool = False


SYSTEMS: dict[str, SystemSpec] = {
    "linear": SystemSpec(linear_system, "one-state linear system x' = 0.95 x + u, AR(1) input (ρ = 0.9)"),
    "rlc": SystemSpec(rlc_circuit, "nonlinear series RLC circuit (saturating inductor), outputs v and i"),
    "duffing": SystemSpec(duffing_oscillator, "Silverbox-like Duffing oscillator, odd multisine input"),
    "sunspots": SystemSpec(None, "statsmodels sunspots, one-step forecasting", forecasting=True),
    "co2": SystemSpec(None, "statsmodels co2 (weekly differences), one-step forecasting", forecasting=True),
}


@dataclass(frozen=True)
class Splits:
    """A system's train, validation and test sequences (raw units): ``u[split]`` ``(T, n_in)``,
    ``y[split]`` ``(T, n_out)``."""

    name: str
    u: dict[str, np.ndarray]
    y: dict[str, np.ndarray]

    @property
    def n_in(self) -> int:
        return self.u["train"].shape[1]

    @property
    def n_out(self) -> int:
        return self.y["train"].shape[1]


def _build(name: str, lengths: dict[str, int], seed: int) -> xr.Dataset:
    spec = SYSTEMS[name]
    data = {}
    if spec.simulate is None:
        s = statsmodels_series(name)
        start = 0
        for split in SPLITS:
            stop = start + lengths[split] + 1
            data[split] = (s[start: stop - 1, None], s[start + 1: stop, None])
            start = stop - 1
    else:
        for k, split in enumerate(SPLITS):  # independent input realisations, each from rest
            split_seed = int(np.random.SeedSequence([seed, k]).generate_state(1)[0])
            data[split] = spec.simulate(lengths[split], seed=split_seed)
    out = {}
    for split, (u, y) in data.items():
        out[f"u_{split}"] = ((f"t_{split}", "input"), np.asarray(u, float))
        out[f"y_{split}"] = ((f"t_{split}", "output"), np.asarray(y, float))
    return xr.Dataset(out, attrs={"system": name, "seed": seed})


def load_system(name: str, n_train: int, n_val: int, n_test: int, *, seed: int = 0, cache: bool = True,
                root=None) -> Splits:
    """The train, validation and test sequences of system ``name`` (:data:`SYSTEMS`), cached.

    Arguments:
        name: the system. n_train, n_val, n_test: samples of each split (a forecasting series must hold
            ``n_train + n_val + n_test + 1`` values; 0 for a series: its whole length split 70/15/15).
        seed: the simulated systems' input realisations (each split its own, drawn from the seed).
    Raises:
        ConfigError: an unknown system, a bad length, a series too short for the lengths asked.
    """
    check_choice("system", name, tuple(SYSTEMS))
    spec = SYSTEMS[name]
    lengths = {s: check_int(f"n_{s}", v, 0 if spec.simulate is None else 2, 10_000_000)
               for s, v in zip(SPLITS, (n_train, n_val, n_test))}
    if spec.simulate is None:
        total = len(statsmodels_series(name)) - 1
        if sum(lengths.values()) == 0:
            lengths = {"train": int(0.7 * total), "val": int(0.15 * total)}
            lengths["test"] = total - lengths["train"] - lengths["val"]
        if sum(lengths.values()) > total or min(lengths.values()) < 2:
            raise bad_value("n_train", n_train, f"lengths n_train + n_val + n_test <= {total} (the {name} series "
                                                f"has {total + 1} values), each at least 2; or all 0")
    config = {"version": VERSION, "system": name, "lengths": lengths, "seed": int(seed)}

    def build() -> xr.Dataset:
        return _build(name, lengths, int(seed))

    ds = cached_dataset(f"system-{name}", config, build, root=root) if cache else build()
    return Splits(name, {s: ds[f"u_{s}"].values for s in SPLITS}, {s: ds[f"y_{s}"].values for s in SPLITS})
