"""The equations of the lab's PDE data sets: each one's stepper, PDE text, geometry, steps, warm-up, coefficients
and initial condition (:data:`EQUATIONS`), and :func:`make_stepper` for a named equation.

Defaults per equation (every one can be overridden):

==============  =====  =====  ====  ========  ======  ========================================
equation        L      N      dt    substeps  warmup  coefficients / initial condition
==============  =====  =====  ====  ========  ======  ========================================
heat            2 pi   128    0.05  1         0       nu=0.01 / LPSDA sines
burgers         2 pi   256    0.05  5         0       nu=0.05 / LPSDA sines (*)
kdv             128    256    0.5   25        0       convection=1, dispersion=1 / LPSDA sines
ks              64     256    0.5   5         100     (none) / LPSDA sines, then 100 frames =
                                                      50 time units discarded (attractor)
navier_stokes   2 pi   64     0.1   10        0       nu=1e-3, drag=0 / band |m| in [1, 4],
                                                      velocity RMS 1 (decaying turbulence)
kolmogorov      2 pi   64     0.1   10        0       nu=1e-3, drag=0.1, forcing_mode=4,
                                                      forcing_amplitude=1 / as navier_stokes
==============  =====  =====  ====  ========  ======  ========================================

LPSDA sines: ``sum_{k=1}^{10} A_k sin(2 pi l_k x / L + phi_k)``, ``A ~ U[-0.5, 0.5)``,
``l in {1, 2}``, ``phi ~ U[0, 2 pi)``.

(*) Burgers: against Cole-Hopf at t = 2 with these sines the solver's max error is
2e-7 for nu = 0.05 at N = 256, but 1e-3 for nu = 0.02 (N = 512: 8e-6) and 6e-2 for
LPSDA's nu = 0.01 (N = 1024: 3e-5): raise ``num_points`` with smaller ``nu``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from lab.checks import bad_value, check_choice

from .etdrk4 import SpectralStepper
from .steppers import (
    BurgersStepper,
    HeatStepper,
    KdVStepper,
    KolmogorovFlowStepper,
    KSStepper,
    NavierStokes2DStepper,
)

__all__ = ["EQUATIONS", "make_stepper", "merge_overrides"]

_SINES = {"num_terms": 10, "amplitude": 0.5, "min_wavenumber": 1, "max_wavenumber": 2}
_VORTICITY = {"min_mode": 1.0, "max_mode": 4.0, "velocity_rms": 1.0}
_TWO_PI = 2.0 * np.pi

#: per-equation defaults and metadata
EQUATIONS: dict[str, dict[str, Any]] = {
    "heat": {
        "stepper": HeatStepper,
        "dims": 1,
        "pde": "u_t = nu u_xx",
        "domain_extent": _TWO_PI,
        "num_points": 128,
        "dt": 0.05,
        "substeps": 1,
        "warmup_steps": 0,
        "coefficients": {"nu": 0.01},
        "ic": "random_sines",
        "ic_options": _SINES,
    },
    "burgers": {
        "stepper": BurgersStepper,
        "dims": 1,
        "pde": "u_t + convection u u_x = nu u_xx",
        "domain_extent": _TWO_PI,
        "num_points": 256,
        "dt": 0.05,
        "substeps": 5,
        "warmup_steps": 0,
        "coefficients": {"nu": 0.05, "convection": 1.0},
        "ic": "random_sines",
        "ic_options": _SINES,
    },
    "kdv": {
        "stepper": KdVStepper,
        "dims": 1,
        "pde": "u_t + convection u u_x + dispersion u_xxx = 0",
        "domain_extent": 128.0,
        "num_points": 256,
        "dt": 0.5,
        "substeps": 25,
        "warmup_steps": 0,
        "coefficients": {"convection": 1.0, "dispersion": 1.0},
        "ic": "random_sines",
        "ic_options": _SINES,
    },
    "ks": {
        "stepper": KSStepper,
        "dims": 1,
        "pde": "u_t + u u_x + u_xx + u_xxxx = 0",
        "domain_extent": 64.0,
        "num_points": 256,
        "dt": 0.5,
        "substeps": 5,
        "warmup_steps": 100,
        "coefficients": {},
        "ic": "random_sines",
        "ic_options": _SINES,
    },
    "navier_stokes": {
        "stepper": NavierStokes2DStepper,
        "dims": 2,
        "pde": "w_t + u.grad(w) = nu lap(w) - drag w; lap(psi) = -w, (u, v) = (psi_y, -psi_x)",
        "domain_extent": _TWO_PI,
        "num_points": 64,
        "dt": 0.1,
        "substeps": 10,
        "warmup_steps": 0,
        "coefficients": {"nu": 1e-3, "drag": 0.0},
        "ic": "random_vorticity",
        "ic_options": _VORTICITY,
    },
    "kolmogorov": {
        "stepper": KolmogorovFlowStepper,
        "dims": 2,
        "pde": (
            "w_t + u.grad(w) = nu lap(w) - drag w - A k_f cos(k_f y), k_f = 2 pi forcing_mode / L; "
            "lap(psi) = -w, (u, v) = (psi_y, -psi_x)"
        ),
        "domain_extent": _TWO_PI,
        "num_points": 64,
        "dt": 0.1,
        "substeps": 10,
        "warmup_steps": 0,
        "coefficients": {"nu": 1e-3, "drag": 0.1, "forcing_mode": 4, "forcing_amplitude": 1.0},
        "ic": "random_vorticity",
        "ic_options": _VORTICITY,
    },
}


def merge_overrides(name: str, defaults: Mapping[str, Any], given: Mapping[str, Any] | None) -> dict[str, Any]:
    """``defaults`` updated by ``given``; a key of ``given`` that ``defaults`` lacks is a bad value of ``name``."""
    given = dict(given or {})
    unknown = sorted(set(given) - set(defaults))
    if unknown:
        allowed = ", ".join(sorted(defaults)) or "none"
        raise bad_value(name, given, f"a mapping with keys from: {allowed} (unknown: {', '.join(unknown)})")
    return {**defaults, **given}


def make_stepper(
    equation: str, domain_extent: float, num_points: int, dt: float, **coefficients: Any
) -> SpectralStepper:
    """Stepper of a named equation.

    Arguments:
        equation: one of :data:`EQUATIONS` (``heat``, ``burgers``, ``kdv``, ``ks``,
            ``navier_stokes``, ``kolmogorov``).
        domain_extent, num_points, dt: geometry and step.
        **coefficients: keyword coefficients of that stepper (defaults from
            :data:`EQUATIONS`).

    Returns:
        the stepper.
    """
    spec = EQUATIONS[check_choice("equation", equation, EQUATIONS)]
    coeffs = merge_overrides("coefficients", spec["coefficients"], coefficients)
    return spec["stepper"](domain_extent, num_points, dt, **coeffs)
