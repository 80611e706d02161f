"""Speed benchmark of the PDE solvers (``lab bench pde``).

Measures trajectory-steps per second (trajectories in the batch x ETDRK4 steps,
per wall-clock second, trajectory stored at every step) of float32 rollouts:

==========  ==========================================  =====  ===========================
case        setting                                     batch  exponax 0.2.0 reference (*)
==========  ==========================================  =====  ===========================
ks          KS, L=64, N=256, dt=0.1                     64     125k - 174k
burgers     Burgers, nu=0.05, L=2 pi, N=256, dt=0.01    64     118k - 152k
kdv         KdV, L=50, N=256, dt=0.01                   64     108k - 125k
ns64        2-D NS vorticity, nu=1e-3, 64^2, dt=0.01    8      2.2k
ns128       same at 128^2                               8      590 - 650
==========  ==========================================  =====  ===========================

(*) exponax order-4 rollouts (jax, jit, CPU) measured on a 2-core machine of the
kind the lab runs on (noisy, +-30%); the 2-D figures were reported as "steps/s"
for a batch of 8 and are read here as trajectory-steps/s.

Each case is timed for this package (:func:`lab.datasets.pde.rollout`), for a
deliberately plain NumPy ETDRK4 of the same scheme written below (numpy.fft,
fresh arrays everywhere, advective form for Navier-Stokes), and for exponax when
it happens to be installed (its speed only: exponax 0.2.0 drops the imaginary part
of its ETDRK coefficients, so its answers are not compared).  The lab and exponax
run alternately, on the solvers' thread count (jax too, via ``XLA_FLAGS``, when
jax is not imported yet), and ``speedup_vs_exponax`` is the median of the
per-round ratios: on a shared machine the load moves between rounds.  The largest
difference between this package and the NumPy baseline is
reported after the first and the last step as a consistency check.
"""

from __future__ import annotations

import datetime as _dt
import functools
import math
import os
import platform
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import xarray as xr

from lab.checks import bad_value
from lab.datasets.pde.etdrk4 import solver_threads
from lab.datasets.pde.initial import random_sines, random_vorticity
from lab.datasets.pde.rollout import rollout
from lab.datasets.pde.steppers import BurgersStepper, KdVStepper, KSStepper, NavierStokes2DStepper

__all__ = ["BENCH_CASES", "format_pde_bench", "numpy_etdrk4_rollout", "run_pde_bench"]

_TWO_PI = 2.0 * np.pi

#: case -> settings and the exponax reference range (trajectory-steps/s)
BENCH_CASES: dict[str, dict[str, Any]] = {
    "ks": {"equation": "ks", "L": 64.0, "N": 256, "dt": 0.1, "batch": 64, "coef": {}, "ref": (125e3, 174e3)},
    "burgers": {
        "equation": "burgers",
        "L": _TWO_PI,
        "N": 256,
        "dt": 0.01,
        "batch": 64,
        "coef": {"nu": 0.05},
        "ref": (118e3, 152e3),
    },
    "kdv": {"equation": "kdv", "L": 50.0, "N": 256, "dt": 0.01, "batch": 64, "coef": {}, "ref": (108e3, 125e3)},
    "ns64": {
        "equation": "navier_stokes",
        "L": _TWO_PI,
        "N": 64,
        "dt": 0.01,
        "batch": 8,
        "coef": {"nu": 1e-3},
        "ref": (2.2e3, 2.2e3),
    },
    "ns128": {
        "equation": "navier_stokes",
        "L": _TWO_PI,
        "N": 128,
        "dt": 0.01,
        "batch": 8,
        "coef": {"nu": 1e-3},
        "ref": (590.0, 650.0),
    },
}

_STEPS = {"full": {1: 400, 2: {64: 150, 128: 40}}, "quick": {1: 15, 2: {64: 5, 128: 2}}}


# --------------------------------------------------------------------------- NumPy baseline
def _plain_coefficients(lin: np.ndarray, h: float, m: int = 32) -> tuple[np.ndarray, ...]:
    r = np.exp(2j * np.pi * (np.arange(1, m + 1) - 0.5) / m)
    lr = h * lin[..., None] + r
    e = np.exp(h * lin)
    e2 = np.exp(h * lin / 2)
    q = h * np.mean((np.exp(lr / 2) - 1) / lr, axis=-1)
    f1 = h * np.mean((-4 - lr + np.exp(lr) * (4 - 3 * lr + lr**2)) / lr**3, axis=-1)
    f2 = h * np.mean((2 + lr + np.exp(lr) * (lr - 2)) / lr**3, axis=-1)
    f3 = h * np.mean((-4 - 3 * lr - lr**2 + np.exp(lr) * (4 - lr)) / lr**3, axis=-1)
    return e, e2, q, f1, f2, f3


def numpy_etdrk4_rollout(
    equation: str, L: float, N: int, dt: float, u0: np.ndarray, n: int, **coef: float
) -> np.ndarray:
    """Plain NumPy ETDRK4 rollout (the benchmark baseline; same scheme as the package).

    Arguments:
        equation: ``ks``, ``burgers``, ``kdv`` (1-D) or ``navier_stokes`` (2-D, decaying).
        L, N, dt: domain, grid points, step.
        u0: ``(batch, N)`` or ``(batch, N, N)``, float32 or float64.
        n: steps.
        **coef: ``nu`` (Burgers, Navier-Stokes), ``convection``/``dispersion`` (KdV).

    Returns:
        ``(batch, n + 1, *spatial)`` array of ``u0``'s dtype.
    """
    cdtype = np.complex64 if u0.dtype == np.float32 else np.complex128
    if equation == "navier_stokes":
        m_y = np.fft.fftfreq(N, 1.0 / N)[:, None]
        m_x = np.arange(N // 2 + 1)[None, :]
        kx, ky = 2 * np.pi * m_x / L, 2 * np.pi * m_y / L
        k2 = kx**2 + ky**2
        inv_k2 = np.where(k2 > 0, 1.0 / np.where(k2 > 0, k2, 1.0), 0.0)
        keep = (np.abs(m_x) <= int(2 / 3 * (N // 2))) & (np.abs(m_y) <= int(2 / 3 * (N // 2)))
        lin = -coef.get("nu", 1e-3) * k2 + 0 * kx

        def nonlinear(w_hat):
            w_hat = w_hat * keep
            psi_hat = w_hat * inv_k2
            u = np.fft.irfft2(1j * ky * psi_hat, s=(N, N))
            v = np.fft.irfft2(-1j * kx * psi_hat, s=(N, N))
            wx = np.fft.irfft2(1j * kx * w_hat, s=(N, N))
            wy = np.fft.irfft2(1j * ky * w_hat, s=(N, N))
            return -np.fft.rfft2(u * wx + v * wy) * keep

        fwd, inv = np.fft.rfft2, (lambda v: np.fft.irfft2(v, s=(N, N)))
    else:
        m = np.arange(N // 2 + 1)
        k = 2 * np.pi * m / L
        k_odd = np.where(m == N // 2, 0.0, k)
        keep = m <= int(2 / 3 * (N // 2))
        if equation == "ks":
            lin, a = k**2 - k**4, 1.0
        elif equation == "burgers":
            lin, a = -coef.get("nu", 0.05) * k**2 + 0j, coef.get("convection", 1.0)
        elif equation == "kdv":
            lin, a = 1j * coef.get("dispersion", 1.0) * k_odd**3, coef.get("convection", 1.0)
        else:
            raise bad_value("equation", equation, "one of 'ks', 'burgers', 'kdv', 'navier_stokes'")

        def nonlinear(v_hat):
            u = np.fft.irfft(v_hat * keep, n=N)
            return -0.5 * a * 1j * k_odd * keep * np.fft.rfft(u * u)

        fwd, inv = np.fft.rfft, (lambda v: np.fft.irfft(v, n=N))
    e, e2, q, f1, f2, f3 = (c.astype(cdtype) for c in _plain_coefficients(np.asarray(lin, dtype=complex), dt))
    out = np.empty((u0.shape[0], n + 1) + u0.shape[1:], dtype=u0.dtype)
    out[:, 0] = u0
    v = fwd(u0)
    for i in range(n):
        nv = nonlinear(v)
        a_ = e2 * v + q * nv
        na = nonlinear(a_)
        b_ = e2 * v + q * na
        nb = nonlinear(b_)
        c_ = e2 * a_ + q * (2 * nb - nv)
        nc = nonlinear(c_)
        v = e * v + f1 * nv + 2 * f2 * (na + nb) + f3 * nc
        out[:, i + 1] = inv(v)
    return out


# --------------------------------------------------------------------------- timing helpers
def _best_time(fn: Callable[[], Any], repeats: int) -> tuple[float, Any]:
    best, result = math.inf, None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t0)
    return best, result


def _lab_stepper(case: dict[str, Any]):
    cls = {"ks": KSStepper, "burgers": BurgersStepper, "kdv": KdVStepper, "navier_stokes": NavierStokes2DStepper}
    return cls[case["equation"]](case["L"], case["N"], case["dt"], **case["coef"])


def _initial(case: dict[str, Any], rng: np.random.Generator) -> np.ndarray:
    if case["equation"] == "navier_stokes":
        return random_vorticity(rng, case["batch"], case["N"], case["L"], dtype=np.float32)
    return random_sines(rng, case["batch"], case["N"], case["L"], dtype=np.float32)


def _exponax_runner(case: dict[str, Any], u0: np.ndarray, n: int) -> Callable[[], Any] | None:
    """A compiled exponax (order 4) rollout of ``n`` steps from ``u0``, or None when exponax is not importable.

    jax is told to use the solvers' thread count (``XLA_FLAGS``, when jax is not imported yet): same threads.
    """
    if "jax" not in sys.modules and "XLA_FLAGS" not in os.environ:
        threads = solver_threads()
        os.environ["XLA_FLAGS"] = (
            "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1" if threads == 1 else ""
        )
    try:
        import exponax as ex
        import jax
        import jax.numpy as jnp
    except Exception:  # noqa: BLE001 - optional dependency
        return None
    try:
        d = 2 if case["equation"] == "navier_stokes" else 1
        L, N, dt = case["L"], case["N"], case["dt"]
        if case["equation"] == "ks":
            stepper = ex.stepper.KuramotoSivashinskyConservative(d, L, N, dt, order=4)
        elif case["equation"] == "burgers":
            stepper = ex.stepper.Burgers(d, L, N, dt, diffusivity=case["coef"]["nu"], order=4)
        elif case["equation"] == "kdv":
            stepper = ex.stepper.KortewegDeVries(d, L, N, dt, order=4)
        else:
            stepper = ex.stepper.NavierStokesVorticity(d, L, N, dt, diffusivity=case["coef"]["nu"], order=4)
        run = jax.jit(jax.vmap(ex.rollout(stepper, n, include_init=True)))
        x = jnp.asarray(u0[:, None])  # exponax wants (batch, channels, *spatial)
        run(x).block_until_ready()  # compile
        return lambda: run(x).block_until_ready()
    except Exception:  # noqa: BLE001 - an API drift must not break the benchmark
        return None


def _interleaved(lab: Callable[[], Any], other: Callable[[], Any] | None, rounds: int) -> tuple[float, float, float]:
    """Best seconds of ``lab`` and ``other`` timed alternately, and the median over rounds of their ratio
    (other's time / lab's: the lab's speed-up); NaN for ``other`` when it is None."""
    t_lab, t_other, ratios = [], [], []
    for _ in range(rounds):
        t_lab.append(_best_time(lab, 1)[0])
        if other is not None:
            t_other.append(_best_time(other, 1)[0])
            ratios.append(t_other[-1] / t_lab[-1])
    nan = float("nan")
    return min(t_lab), (min(t_other) if t_other else nan), (float(np.median(ratios)) if ratios else nan)


def _exponax_version() -> str:
    try:
        import exponax

        return str(getattr(exponax, "__version__", "installed"))
    except Exception:  # noqa: BLE001
        return "not installed"


# --------------------------------------------------------------------------- public API
def run_pde_bench(quick: bool = False, progress: bool = True) -> xr.Dataset:
    """Time float32 ETDRK4 rollouts of KS, Burgers, KdV (batch 64, N=256) and 2-D NS (batch 8, 64^2 and 128^2).

    Arguments:
        quick: a few steps per case, one repeat (a smoke test of a few seconds).
        progress: show a ``tqdm.auto`` bar over the cases.

    Returns:
        Dataset over dimension ``case`` with variables ``lab_steps_per_s``,
        ``numpy_steps_per_s``, ``exponax_steps_per_s`` (NaN when exponax is not
        installed), ``reference_low`` / ``reference_high`` (exponax figures of
        the brief), ``speedup_vs_numpy``, ``speedup_vs_exponax`` (the median over
        interleaved rounds of exponax's time over the lab's; NaN without exponax),
        ``ratio_vs_reference_high``,
        ``max_abs_diff_first_step`` / ``max_abs_diff_last_step`` (package vs NumPy
        baseline) and the settings ``equation``, ``num_points``,
        ``batch``, ``dt``, ``n_steps``; rates are trajectory-steps per second.
    """
    mode = "quick" if quick else "full"
    repeats = 1 if quick else 3
    rounds = 1 if quick else 7
    rng = np.random.default_rng(0)
    names = list(BENCH_CASES)
    keys = "lab numpy exponax vs_exponax ref_low ref_high diff1 diff equation N batch dt n_steps".split()
    rows: dict[str, list[Any]] = {k: [] for k in keys}
    iterator: Any = names
    if progress:
        from tqdm.auto import tqdm

        iterator = tqdm(names, desc="bench pde", unit="case", leave=False)
    for name in iterator:
        case = BENCH_CASES[name]
        d = 2 if case["equation"] == "navier_stokes" else 1
        n = _STEPS[mode][1] if d == 1 else _STEPS[mode][2][case["N"]]
        u0 = _initial(case, rng)
        stepper = _lab_stepper(case)
        rollout(stepper, u0, 2)  # warm caches (coefficient tensors, FFT plans, compiled loops)
        lab_traj = rollout(stepper, u0, n)
        exponax = _exponax_runner(case, u0, n)
        t_lab, t_ex, ratio = _interleaved(functools.partial(rollout, stepper, u0, n), exponax, rounds)
        geometry = (case["equation"], case["L"], case["N"], case["dt"], u0)
        numpy_etdrk4_rollout(*geometry, 1, **case["coef"])
        t_np, np_traj = _best_time(functools.partial(numpy_etdrk4_rollout, *geometry, n, **case["coef"]), repeats)
        rate = case["batch"] * n
        diffs = [float(np.max(np.abs(lab_traj[:, i].astype(np.float64) - np_traj[:, i]))) for i in (1, -1)]
        values = (rate / t_lab, rate / t_np, rate / t_ex, ratio, *case["ref"], *diffs, case["equation"], case["N"])
        for key, value in zip(keys, (*values, case["batch"], case["dt"], n), strict=True):
            rows[key].append(value)
    lab = np.array(rows["lab"])
    unit = {"units": "trajectory-steps / s"}
    ds = xr.Dataset(
        {
            "lab_steps_per_s": ("case", lab, {**unit, "long_name": "lab.datasets.pde (torch FFT, float32)"}),
            "numpy_steps_per_s": ("case", np.array(rows["numpy"]), {**unit, "long_name": "plain NumPy ETDRK4"}),
            "exponax_steps_per_s": ("case", np.array(rows["exponax"]), {**unit, "long_name": "exponax order 4"}),
            "speedup_vs_exponax": (
                "case",
                np.array(rows["vs_exponax"]),
                {"units": "1", "long_name": "lab / exponax, median over interleaved rounds (NaN: not installed)"},
            ),
            "reference_low": ("case", np.array(rows["ref_low"]), {**unit, "long_name": "exponax 0.2.0, brief, low"}),
            "reference_high": ("case", np.array(rows["ref_high"]), {**unit, "long_name": "exponax 0.2.0, high"}),
            "speedup_vs_numpy": ("case", lab / np.array(rows["numpy"]), {"units": "1"}),
            "ratio_vs_reference_high": ("case", lab / np.array(rows["ref_high"]), {"units": "1"}),
            "max_abs_diff_first_step": (
                "case",
                np.array(rows["diff1"]),
                {"long_name": "max |lab - numpy| after one step (float32)"},
            ),
            "max_abs_diff_last_step": (
                "case",
                np.array(rows["diff"]),
                {"long_name": "max |lab - numpy| after the last step (float32; KS is chaotic, so this grows)"},
            ),
        },
        coords={
            "case": ("case", np.array(names, dtype=str)),
            "equation": ("case", np.array(rows["equation"], dtype=str)),
            "num_points": ("case", np.array(rows["N"])),
            "batch": ("case", np.array(rows["batch"])),
            "dt": ("case", np.array(rows["dt"])),
            "n_steps": ("case", np.array(rows["n_steps"])),
        },
        attrs={
            "title": "PDE solver speed (ETDRK4 rollouts, float32)",
            "quick": int(bool(quick)),
            "repeats": repeats,
            "timing": (
                "rates: best wall-clock run of a full rollout (trajectory stored every step); lab and exponax "
                "alternate over `rounds` rounds (speedup_vs_exponax: the median of the per-round ratios), "
                "NumPy: best of `repeats`"
            ),
            "rounds": rounds,
            "torch_threads": solver_threads(),
            "exponax": _exponax_version(),
            "reference": (
                "exponax 0.2.0 order-4 rollouts on a 2-core machine (the lab's plan); 2-D read as traj-steps/s"
            ),
            "machine": f"{platform.machine()} {platform.processor() or ''}".strip(),
            "python": platform.python_version(),
            "numpy_version": np.__version__,
            "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        },
    )
    try:
        import torch

        ds.attrs["torch_version"] = str(torch.__version__)
    except Exception:  # noqa: BLE001
        pass
    return ds


def _fmt_rate(x: float) -> str:
    if not np.isfinite(x):
        return "-"
    return f"{x / 1e3:.1f}k" if x >= 1e4 else f"{x:.0f}"


def format_pde_bench(ds: xr.Dataset) -> str:
    """Plain-text table of a :func:`run_pde_bench` result.

    Arguments:
        ds: the benchmark data set.

    Returns:
        multi-line string (one row per case, rates in trajectory-steps/s).
    """
    header = (
        f"{'case':<8} {'grid':>8} {'batch':>5} {'lab':>8} {'numpy':>8} {'exponax':>8} "
        f"{'ref(exponax)':>14} {'x numpy':>7} {'x exponax':>9} {'x ref':>6} {'|lab-np|1':>9} {'|lab-np|n':>9}"
    )
    lines = [
        "PDE solver speed, trajectory-steps/s (float32 ETDRK4 rollouts"
        + (", quick mode)" if int(ds.attrs.get("quick", 0)) else ")"),
        header,
        "-" * len(header),
    ]
    for i, case in enumerate(ds["case"].values):
        n = int(ds["num_points"].values[i])
        grid = f"{n}^2" if str(ds["equation"].values[i]) == "navier_stokes" else str(n)
        lo, hi = float(ds["reference_low"].values[i]), float(ds["reference_high"].values[i])
        ref = _fmt_rate(lo) if lo == hi else f"{_fmt_rate(lo)}-{_fmt_rate(hi)}"
        lines.append(
            f"{case!s:<8} {grid:>8} {int(ds['batch'].values[i]):>5} "
            f"{_fmt_rate(float(ds['lab_steps_per_s'].values[i])):>8} "
            f"{_fmt_rate(float(ds['numpy_steps_per_s'].values[i])):>8} "
            f"{_fmt_rate(float(ds['exponax_steps_per_s'].values[i])):>8} {ref:>14} "
            f"{float(ds['speedup_vs_numpy'].values[i]):>7.2f} {float(ds['speedup_vs_exponax'].values[i]):>9.2f} "
            f"{float(ds['ratio_vs_reference_high'].values[i]):>6.2f} "
            f"{float(ds['max_abs_diff_first_step'].values[i]):>9.1e} "
            f"{float(ds['max_abs_diff_last_step'].values[i]):>9.1e}"
        )
    lines.append(
        "x numpy = lab / plain NumPy ETDRK4; x exponax = lab / exponax, median of interleaved rounds; "
        "x ref = lab / upper exponax reference figure; "
        "|lab-np|1, n: max difference to the NumPy baseline after 1 and n steps; "
        f"exponax: {ds.attrs.get('exponax', '?')}; torch threads: {ds.attrs.get('torch_threads', '?')}"
    )
    return "\n".join(lines)
