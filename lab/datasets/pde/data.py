"""Cached trajectory data sets of the lab's PDEs.

:func:`make_pde_dataset` draws initial conditions with a seeded
:class:`numpy.random.Generator`, optionally discards a warm-up, rolls the ETDRK4
stepper out and returns an :class:`xarray.Dataset`; the result is cached as
NetCDF under the data directory (:mod:`lab.cache`), keyed by the fully
resolved configuration (:func:`pde_dataset_config`), so a second call with the
same arguments reads the file instead of solving.

Data layout:

* 1-D: variable ``u`` with dims ``(traj, time, x)``;
* 2-D: variable ``vorticity`` with dims ``(traj, time, y, x)``;
* coordinates ``traj`` (0..n_traj-1), ``time`` (``0, dt, .., n_steps dt``, counted
  from the end of the warm-up), ``x`` (and ``y``) = ``j L / N``;
* attributes: equation, the PDE as text, conventions, geometry, ``dt``,
  ``solver_dt = dt / substeps``, warm-up, coefficients and initial-condition
  options (JSON), seed, generator version.

The defaults of each equation (geometry, steps, warm-up, coefficients, initial condition) are in
:mod:`lab.datasets.pde.equations`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

import numpy as np
import xarray as xr

from lab.cache import cached_dataset
from lab.checks import check_choice, check_int, check_real

from .equations import EQUATIONS, make_stepper, merge_overrides
from .etdrk4 import stepping
from .initial import random_sines, random_vorticity

__all__ = ["GENERATOR_VERSION", "make_pde_dataset", "pde_dataset_config"]

#: bump when the generated numbers change for an unchanged config (invalidates caches)
GENERATOR_VERSION = 1

_CONVENTIONS = (
    "periodic domain [0, L)^d, grid x_j = j L / N; 2-D fields indexed [y, x]; "
    "ETDRK4 (Kassam-Trefethen, complex contour coefficients, M=32), 2/3-rule dealiasing; nondimensional units"
)


def pde_dataset_config(
    equation: str,
    *,
    n_traj: int = 16,
    n_steps: int = 100,
    num_points: int | None = None,
    dt: float | None = None,
    domain_extent: float | None = None,
    substeps: int | None = None,
    warmup_steps: int | None = None,
    coefficients: Mapping[str, Any] | None = None,
    ic_options: Mapping[str, Any] | None = None,
    dtype: str = "float32",
    seed: int = 0,
) -> dict[str, Any]:
    """The fully resolved, validated configuration of :func:`make_pde_dataset` (its cache key).

    Arguments: as :func:`make_pde_dataset`.

    Returns:
        JSON-serialisable dict.
    """
    spec = EQUATIONS[check_choice("equation", equation, EQUATIONS)]
    cfg: dict[str, Any] = {
        "generator": "lab.datasets.pde",
        "generator_version": GENERATOR_VERSION,
        "equation": equation,
        "n_traj": check_int("n_traj", n_traj, minimum=1),
        "n_steps": check_int("n_steps", n_steps, minimum=0),
        "num_points": check_int("num_points", spec["num_points"] if num_points is None else num_points, minimum=4),
        "dt": check_real("dt", spec["dt"] if dt is None else dt, 0.0, lo_open=True),
        "domain_extent": check_real(
            "domain_extent", spec["domain_extent"] if domain_extent is None else domain_extent, 0.0, lo_open=True
        ),
        "substeps": check_int("substeps", spec["substeps"] if substeps is None else substeps, minimum=1),
        "warmup_steps": check_int(
            "warmup_steps", spec["warmup_steps"] if warmup_steps is None else warmup_steps, minimum=0
        ),
        "dtype": check_choice("dtype", dtype, ("float32", "float64")),
        "seed": check_int("seed", seed, minimum=0),
        "ic": spec["ic"],
    }
    coeffs = merge_overrides("coefficients", spec["coefficients"], coefficients)
    for key, value in coeffs.items():
        coeffs[key] = check_int(key, value, minimum=0) if key == "forcing_mode" else check_real(key, value)
    cfg["coefficients"] = coeffs
    ic = merge_overrides("ic_options", spec["ic_options"], ic_options)
    for key, value in ic.items():
        ic[key] = (
            check_int(key, value, minimum=1)
            if key in ("num_terms", "min_wavenumber", "max_wavenumber")
            else check_real(key, value)
        )
    cfg["ic_options"] = ic
    # build the stepper once so that invalid coefficient values fail here, before any caching
    make_stepper(equation, cfg["domain_extent"], cfg["num_points"], cfg["dt"] / cfg["substeps"], **coeffs)
    return cfg


def _initial_conditions(cfg: Mapping[str, Any], rng: np.random.Generator) -> np.ndarray:
    n, L = cfg["num_points"], cfg["domain_extent"]
    if cfg["ic"] == "random_sines":
        return random_sines(rng, cfg["n_traj"], n, L, **cfg["ic_options"])
    return random_vorticity(rng, cfg["n_traj"], n, L, **cfg["ic_options"])


def _build(cfg: Mapping[str, Any], progress: bool) -> xr.Dataset:
    import torch

    spec = EQUATIONS[cfg["equation"]]
    stepper = make_stepper(
        cfg["equation"], cfg["domain_extent"], cfg["num_points"], cfg["dt"] / cfg["substeps"], **cfg["coefficients"]
    )
    rng = np.random.default_rng(cfg["seed"])
    dtype = np.dtype(cfg["dtype"])
    u0 = _initial_conditions(cfg, rng).astype(dtype)
    n_traj, n_steps, substeps, warmup = cfg["n_traj"], cfg["n_steps"], cfg["substeps"], cfg["warmup_steps"]
    data = np.empty((n_traj, n_steps + 1) + stepper.spatial_shape, dtype=dtype)
    chunk = 256 if spec["dims"] == 1 else 16
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=n_traj * (warmup + n_steps), desc=f"pde {cfg['equation']}", unit="traj-frame", leave=False)
    try:
        with stepping():
            for start in range(0, n_traj, chunk):
                stop = min(start + chunk, n_traj)
                v = stepper.to_fourier(torch.from_numpy(u0[start:stop]))
                for _ in range(warmup):
                    for _ in range(substeps):
                        v = stepper.step_fourier(v)
                    if bar is not None:
                        bar.update(stop - start)
                data[start:stop, 0] = stepper.from_fourier(v).numpy()
                for i in range(1, n_steps + 1):
                    for _ in range(substeps):
                        v = stepper.step_fourier(v)
                    data[start:stop, i] = stepper.from_fourier(v).numpy()
                    if bar is not None:
                        bar.update(stop - start)
    finally:
        if bar is not None:
            bar.close()
    if not np.all(np.isfinite(data)):
        raise RuntimeError(
            f"the {cfg['equation']} rollout became non-finite (solver dt = {cfg['dt'] / cfg['substeps']}); "
            "reduce dt or raise substeps"
        )
    L, n = cfg["domain_extent"], cfg["num_points"]
    grid = np.arange(n) * (L / n)
    coords: dict[str, Any] = {
        "traj": ("traj", np.arange(n_traj), {"long_name": "trajectory index"}),
        "time": ("time", np.arange(n_steps + 1) * cfg["dt"], {"long_name": "time after warm-up", "units": "1"}),
        "x": ("x", grid, {"long_name": "x", "units": "1"}),
    }
    if spec["dims"] == 1:
        var, dims, long_name = "u", ("traj", "time", "x"), "u"
    else:
        var, dims, long_name = "vorticity", ("traj", "time", "y", "x"), "vorticity w = v_x - u_y"
        coords["y"] = ("y", grid, {"long_name": "y", "units": "1"})
    attrs = {
        "title": f"{cfg['equation']} trajectories (lab.datasets.pde)",
        "equation": cfg["equation"],
        "pde": spec["pde"],
        "conventions": _CONVENTIONS,
        "state_variable": var,
        "domain_extent": L,
        "num_points": n,
        "dt": cfg["dt"],
        "solver_dt": cfg["dt"] / substeps,
        "substeps": substeps,
        "warmup_steps": warmup,
        "warmup_time": warmup * cfg["dt"],
        "coefficients": json.dumps(cfg["coefficients"], sort_keys=True),
        "initial_condition": cfg["ic"],
        "ic_options": json.dumps(cfg["ic_options"], sort_keys=True),
        "seed": cfg["seed"],
        "stepper": repr(stepper),
        "generator_version": GENERATOR_VERSION,
    }
    return xr.Dataset(
        {var: (dims, data, {"long_name": long_name, "units": "1"})},
        coords=coords,
        attrs=attrs,
    )


def _validator(cfg: Mapping[str, Any]):
    spec = EQUATIONS[cfg["equation"]]
    var = "u" if spec["dims"] == 1 else "vorticity"
    n = cfg["num_points"]
    expected = {"traj": cfg["n_traj"], "time": cfg["n_steps"] + 1, "x": n}
    if spec["dims"] == 2:
        expected["y"] = n

    def validate(ds: xr.Dataset) -> None:
        if var not in ds:
            raise ValueError(f"variable {var!r} missing")
        sizes = dict(ds[var].sizes)
        if sizes != expected:
            raise ValueError(f"{var} has sizes {sizes}, expected {expected}")
        if ds[var].dtype != np.dtype(cfg["dtype"]):
            raise ValueError(f"{var} has dtype {ds[var].dtype}, expected {cfg['dtype']}")
        if not np.all(np.isfinite(ds[var].values)):
            raise ValueError(f"{var} has non-finite values")

    return validate


def make_pde_dataset(
    equation: str,
    *,
    n_traj: int = 16,
    n_steps: int = 100,
    num_points: int | None = None,
    dt: float | None = None,
    domain_extent: float | None = None,
    substeps: int | None = None,
    warmup_steps: int | None = None,
    coefficients: Mapping[str, Any] | None = None,
    ic_options: Mapping[str, Any] | None = None,
    dtype: str = "float32",
    seed: int = 0,
    cache: bool = True,
    root: str | os.PathLike[str] | None = None,
    progress: bool = True,
) -> xr.Dataset:
    """Trajectories of a PDE from random initial conditions, generated once and cached.

    Arguments:
        equation: ``heat``, ``burgers``, ``kdv``, ``ks``, ``navier_stokes`` or
            ``kolmogorov``.
        n_traj: number of trajectories.
        n_steps: saved steps after the initial frame.
        num_points: grid points per axis (default per equation).
        dt: time between saved frames (default per equation).
        domain_extent: side length ``L`` (default per equation).
        substeps: solver steps per saved frame (solver step ``dt / substeps``).
        warmup_steps: frames simulated and discarded before the first saved frame.
        coefficients: overrides of the equation's coefficients (e.g. ``{"nu": 0.05}``).
        ic_options: overrides of the initial-condition options (``num_terms``,
            ``amplitude``, ``min_wavenumber``, ``max_wavenumber`` for sines;
            ``min_mode``, ``max_mode``, ``velocity_rms`` for vorticity).
        dtype: ``"float32"`` or ``"float64"``, used by the solver and the output.
        seed: seed of the :func:`numpy.random.default_rng` drawing the initial
            conditions.
        cache: read/write the cache; ``False`` always solves and writes nothing.
        root: cache directory (see :func:`lab.cache.data_root`).
        progress: show a ``tqdm.auto`` progress bar while solving.

    Returns:
        Dataset with ``u`` ``(traj, time, x)`` (1-D) or ``vorticity``
        ``(traj, time, y, x)`` (2-D), see the module docstring.
    """
    cfg = pde_dataset_config(
        equation,
        n_traj=n_traj,
        n_steps=n_steps,
        num_points=num_points,
        dt=dt,
        domain_extent=domain_extent,
        substeps=substeps,
        warmup_steps=warmup_steps,
        coefficients=coefficients,
        ic_options=ic_options,
        dtype=dtype,
        seed=seed,
    )
    if not cache:
        return _build(cfg, progress)
    return cached_dataset(f"pde-{equation}", cfg, lambda: _build(cfg, progress), root=root, validate=_validator(cfg))
