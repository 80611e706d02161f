"""Pseudo-spectral PDE solvers (ETDRK4) and data sets on periodic domains.

Equations (``x`` in ``[0, L)``, periodic; all quantities nondimensional):

* heat (1-D or 2-D):       ``u_t = nu Laplacian(u)``                         :class:`HeatStepper`
* viscous Burgers:         ``u_t + a u u_x = nu u_xx`` (``a = 1``)           :class:`BurgersStepper`
* Korteweg-de Vries:       ``u_t + a u u_x + b u_xxx = 0``                   :class:`KdVStepper`
  (default ``a = b = 1``, the LPSDA convention; ``a = 6`` is the textbook one)
* Kuramoto-Sivashinsky:    ``u_t + u u_x + u_xx + u_xxxx = 0``               :class:`KSStepper`
* 2-D Navier-Stokes, vorticity form, on ``[0, L)^2``:
  ``w_t + u . grad(w) = nu Laplacian(w) - drag w + f``, ``Laplacian(psi) = -w``,
  ``(u, v) = (psi_y, -psi_x)``; decaying turbulence (``f = 0``,
  :class:`NavierStokes2DStepper`) or Kolmogorov flow (``f = -A k_f cos(k_f y)``, from
  the body force ``A sin(k_f y) e_x``, with linear drag; :class:`KolmogorovFlowStepper`).
  :func:`velocity_from_vorticity` recovers ``(u, v)``.

Scheme: ETDRK4 of Cox-Matthews / Kassam-Trefethen with complex contour-integral
coefficients (M = 32 points, radius 1, kept complex), rfft, 2/3-rule dealiasing of
the quadratic terms (see :mod:`lab.datasets.pde.etdrk4`).

Conventions: grid ``x_j = j L / N``; a state is a real array ``(batch, *spatial)``,
2-D fields indexed ``[batch, y, x]``; float32 or float64 (coefficients are cast
to the matching complex precision).  A stepper is built from the geometry,
positionally, and the coefficients, by keyword::

    ks = KSStepper(64.0, 256, 0.1)               # domain_extent, num_points, dt
    u1 = ks(u0)                                  # (batch, 256) -> (batch, 256)
    traj = rollout(ks, u0, 100)                  # (batch, 101, 256)

Initial conditions (:mod:`~lab.datasets.pde.initial`): LPSDA random sine sums,
KS states after a warm-up on the attractor, band-limited random vorticity, the
Taylor-Green vortex.  Exact solutions (:mod:`~lab.datasets.pde.exact`) and
:func:`validate_solvers` check the solvers; :func:`make_pde_dataset`
(:mod:`~lab.datasets.pde.data`) generates cached NetCDF data sets; the speed
benchmark is :mod:`lab.bench.pde`.
"""

from .data import make_pde_dataset, pde_dataset_config
from .equations import EQUATIONS, make_stepper
from .etdrk4 import SpectralStepper, etdrk4_coefficients
from .exact import burgers_cole_hopf, heat_exact, kdv_soliton
from .initial import (
    ks_initial_condition,
    random_sine_parameters,
    random_sines,
    random_vorticity,
    sine_series,
    taylor_green_vorticity,
)
from .rollout import advance, rollout
from .steppers import (
    BurgersStepper,
    HeatStepper,
    KdVStepper,
    KolmogorovFlowStepper,
    KSStepper,
    NavierStokes2DStepper,
    velocity_from_vorticity,
)
from .validation import validate_solvers

__all__ = [
    "EQUATIONS",
    "BurgersStepper",
    "HeatStepper",
    "KSStepper",
    "KdVStepper",
    "KolmogorovFlowStepper",
    "NavierStokes2DStepper",
    "SpectralStepper",
    "advance",
    "burgers_cole_hopf",
    "etdrk4_coefficients",
    "heat_exact",
    "kdv_soliton",
    "ks_initial_condition",
    "make_pde_dataset",
    "make_stepper",
    "pde_dataset_config",
    "random_sine_parameters",
    "random_sines",
    "random_vorticity",
    "rollout",
    "sine_series",
    "taylor_green_vorticity",
    "validate_solvers",
    "velocity_from_vorticity",
]
