"""ETDRK4 steppers for the lab's periodic PDEs (see :mod:`lab.datasets.pde` for the equations).

Every class takes the geometry positionally, ``(domain_extent, num_points, dt)``,
and the physical coefficients as keywords; ``stepper(u)`` advances a batch
``(batch, *spatial)`` by one step ``dt``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from lab.checks import bad_value, check_int, check_real

from .etdrk4 import SpectralStepper

__all__ = [
    "BurgersStepper",
    "HeatStepper",
    "KSStepper",
    "KdVStepper",
    "KolmogorovFlowStepper",
    "NavierStokes2DStepper",
    "velocity_from_vorticity",
]


class HeatStepper(SpectralStepper):
    """Heat equation ``u_t = nu * Laplacian(u)`` (linear: the step is exact, ``v' = exp(-nu |k|^2 dt) v``).

    Arguments:
        domain_extent: side length ``L`` of the periodic box.
        num_points: grid points per axis.
        dt: time step.
        nu: diffusivity (>= 0).
        num_spatial_dims: 1 or 2.
        **kwargs: ``dealias_fraction``, ``num_circle_points``, ``circle_radius`` of
            :class:`SpectralStepper`.
    """

    has_nonlinear = False

    def __init__(
        self,
        domain_extent: float,
        num_points: int,
        dt: float,
        *,
        nu: float = 0.01,
        num_spatial_dims: int = 1,
        **kwargs: Any,
    ) -> None:
        self.nu = check_real("nu", nu, 0.0)
        super().__init__(num_spatial_dims, domain_extent, num_points, dt, **kwargs)

    def _linear_operator(self) -> np.ndarray:
        k2 = sum(k**2 for k in self.wavenumbers())
        return -self.nu * k2

    def _describe(self) -> dict[str, Any]:
        return {"nu": self.nu}


class _Convection1D(SpectralStepper):
    """1-D base for ``u_t + convection * u u_x = (linear terms)``.

    The nonlinear term is written in conservative form,
    ``N = -(convection / 2) d/dx (u^2)``, and dealiased on input and output.
    """

    def __init__(self, domain_extent: float, num_points: int, dt: float, *, convection: float, **kwargs: Any):
        self.convection = check_real("convection", convection)
        super().__init__(1, domain_extent, num_points, dt, **kwargs)

    def _nonlinear_factor(self) -> np.ndarray:
        (k,) = self.wavenumbers(odd_derivative=True)
        return -0.5j * self.convection * k * self.dealias_mask

    def _nonlinear(self, v_hat: torch.Tensor, arrays: dict[str, torch.Tensor]) -> torch.Tensor:
        # unscaled F[u^2] of the dealiased state (v_hat is zero past the kept modes); the factor
        # -(a/2) i k mask is folded into the coefficients
        u = torch.fft.irfft(v_hat, n=self.num_points)
        return torch.fft.rfft(u.square_())[..., : self.kept_columns]

    def _nonlinear_rows(self, v_hat: torch.Tensor) -> np.ndarray:
        """The fused step's form of :meth:`_nonlinear`: ``(batch, 1, N // 2 + 1)`` NumPy view, all columns."""
        return torch.fft.rfft(torch.fft.irfft(v_hat, n=self.num_points).square_()).numpy()[:, None, :]


class BurgersStepper(_Convection1D):
    """Viscous Burgers ``u_t + convection * u u_x = nu * u_xx`` (1-D).

    Arguments:
        domain_extent: length ``L`` of the periodic interval.
        num_points: grid points ``N``.
        dt: time step.
        nu: viscosity (>= 0).  Resolution matters: ``nu = 0.05`` is resolved to
            ~1e-7 by ``N = 256`` on ``L = 2 pi`` with O(1) data; ``nu = 0.01`` needs
            ``N >= 1024``.
        convection: coefficient of ``u u_x`` (1 is the usual form).
        **kwargs: ``dealias_fraction``, ``num_circle_points``, ``circle_radius``.
    """

    def __init__(
        self,
        domain_extent: float,
        num_points: int,
        dt: float,
        *,
        nu: float = 0.05,
        convection: float = 1.0,
        **kwargs: Any,
    ) -> None:
        self.nu = check_real("nu", nu, 0.0)
        super().__init__(domain_extent, num_points, dt, convection=convection, **kwargs)

    def _linear_operator(self) -> np.ndarray:
        (k,) = self.wavenumbers()
        return -self.nu * k**2

    def _describe(self) -> dict[str, Any]:
        return {"nu": self.nu, "convection": self.convection}


class KdVStepper(_Convection1D):
    """Korteweg-de Vries ``u_t + convection * u u_x + dispersion * u_xxx = 0`` (1-D).

    The default ``convection=1`` is the LPSDA convention ``u_t + u u_x + u_xxx = 0``;
    ``convection=6`` gives the textbook form whose one-soliton is
    ``(c/2) sech^2(sqrt(c)/2 (x - c t))``.  The linear operator ``L = i dispersion k^3``
    is purely imaginary; its ETDRK4 coefficients are kept complex.

    Arguments:
        domain_extent: length ``L`` of the periodic interval.
        num_points: grid points ``N``.
        dt: time step.
        convection: coefficient of ``u u_x``.
        dispersion: coefficient of ``u_xxx``.
        **kwargs: ``dealias_fraction``, ``num_circle_points``, ``circle_radius``.
    """

    def __init__(
        self,
        domain_extent: float,
        num_points: int,
        dt: float,
        *,
        convection: float = 1.0,
        dispersion: float = 1.0,
        **kwargs: Any,
    ) -> None:
        self.dispersion = check_real("dispersion", dispersion)
        super().__init__(domain_extent, num_points, dt, convection=convection, **kwargs)

    def _linear_operator(self) -> np.ndarray:
        (k,) = self.wavenumbers(odd_derivative=True)
        # -dispersion * (ik)^3 = i * dispersion * k^3
        return 1j * self.dispersion * k**3

    def _describe(self) -> dict[str, Any]:
        return {"convection": self.convection, "dispersion": self.dispersion}


class KSStepper(_Convection1D):
    """Kuramoto-Sivashinsky ``u_t + u u_x + u_xx + u_xxxx = 0`` (1-D), ``L = k^2 - k^4``.

    Arguments:
        domain_extent: length ``L`` of the periodic interval (chaotic for ``L`` of a
            few tens; the standard benchmark uses 64).
        num_points: grid points ``N``.
        dt: time step.
        **kwargs: ``dealias_fraction``, ``num_circle_points``, ``circle_radius``.
    """

    def __init__(self, domain_extent: float, num_points: int, dt: float, **kwargs: Any) -> None:
        super().__init__(domain_extent, num_points, dt, convection=1.0, **kwargs)

    def _linear_operator(self) -> np.ndarray:
        (k,) = self.wavenumbers()
        return k**2 - k**4


class NavierStokes2DStepper(SpectralStepper):
    """2-D incompressible Navier-Stokes in vorticity form on ``[0, L)^2``.

    ``w_t + u . grad(w) = nu Laplacian(w) - drag * w + f``, with the streamfunction
    ``psi`` from ``Laplacian(psi) = -w`` and velocity ``(u, v) = (psi_y, -psi_x)``
    (so ``w = v_x - u_y``).  The advection is evaluated in the conservative form
    ``div(u w)`` (equal for divergence-free ``u``; it conserves the mean exactly),
    dealiased with the 2/3 rule.  Optional Kolmogorov forcing: the body force
    ``F = A sin(k_f y) e_x`` on the velocity, i.e. ``f = -A k_f cos(k_f y)`` on the
    vorticity, ``k_f = 2 pi forcing_mode / L``.

    States are vorticity arrays of shape ``(batch, N, N)``, indexed ``[b, y, x]``.

    Arguments:
        domain_extent: side length ``L``.
        num_points: grid points ``N`` per axis.
        dt: time step.
        nu: kinematic viscosity (>= 0).
        drag: linear (Rayleigh) drag coefficient (>= 0).
        forcing_mode: integer wave number ``n_f`` of the Kolmogorov forcing; 0 for
            none (decaying turbulence).
        forcing_amplitude: amplitude ``A`` of the velocity forcing.
        **kwargs: ``dealias_fraction``, ``num_circle_points``, ``circle_radius``.
    """

    def __init__(
        self,
        domain_extent: float,
        num_points: int,
        dt: float,
        *,
        nu: float = 1e-3,
        drag: float = 0.0,
        forcing_mode: int = 0,
        forcing_amplitude: float = 1.0,
        **kwargs: Any,
    ) -> None:
        self.nu = check_real("nu", nu, 0.0)
        self.drag = check_real("drag", drag, 0.0)
        self.forcing_mode = check_int("forcing_mode", forcing_mode, minimum=0)
        self.forcing_amplitude = check_real("forcing_amplitude", forcing_amplitude)
        super().__init__(2, domain_extent, num_points, dt, **kwargs)
        if self.forcing_mode > self.num_kept_modes:
            raise bad_value("forcing_mode", forcing_mode, f"an integer in [0, {self.num_kept_modes}] (the largest "
                            f"dealiased mode for num_points={self.num_points})")

    def _linear_operator(self) -> np.ndarray:
        ky, kx = self.wavenumbers()
        return -self.nu * (kx**2 + ky**2) - self.drag

    def forcing(self) -> np.ndarray:
        """Vorticity forcing ``f`` on the grid; shape ``(N, N)`` indexed ``[y, x]``."""
        n = self.num_points
        if self.forcing_mode == 0:
            return np.zeros((n, n))
        kf = 2.0 * np.pi * self.forcing_mode / self.domain_extent
        y = self.grid
        column = -self.forcing_amplitude * kf * np.cos(kf * y)
        return np.repeat(column[:, None], n, axis=1)

    def _nonlinear_arrays(self) -> dict[str, np.ndarray]:
        ky, kx = self.wavenumbers(odd_derivative=True)
        ky2, kx2 = self.wavenumbers()
        k2 = kx2**2 + ky2**2
        inv_k2 = np.divide(1.0, k2, out=np.zeros_like(k2), where=k2 > 0)
        mask = self.dealias_mask.astype(np.float64)
        shape = self.fourier_shape
        # masked vorticity -> (u_hat, v_hat, w_hat); u = psi_y, v = -psi_x, psi = w / |k|^2
        project = np.stack(
            [
                np.broadcast_to(1j * ky * inv_k2 * mask, shape),
                np.broadcast_to(-1j * kx * inv_k2 * mask, shape),
                np.broadcast_to(mask + 0j, shape),
            ]
        )
        # (F[u w], F[v w]) -> -(i kx F[u w] + i ky F[v w]), dealiased
        divergence = np.stack([np.broadcast_to(-1j * kx * mask, shape), np.broadcast_to(-1j * ky * mask, shape)])
        # P on the kept columns in (column, y) order, for the y-transforms along the last axis
        arrays = {"P": project, "PT": project[..., : self.kept_columns].transpose(0, 2, 1).copy(), "D": divergence}
        arrays["DT"] = divergence[..., : self.kept_columns].transpose(0, 2, 1).copy()
        if self.forcing_mode:
            arrays["F"] = np.fft.rfft2(self.forcing()).astype(np.complex128)
        return arrays

    def _nonlinear(self, v_hat: torch.Tensor, arrays: dict[str, torch.Tensor]) -> torch.Tensor:
        out = torch.empty_like(v_hat)
        self._nonlinear_into(v_hat, arrays, out)
        return out[..., : self.kept_columns]

    def _nonlinear_into(self, v_hat: torch.Tensor, arrays: dict[str, torch.Tensor], out: torch.Tensor) -> None:
        # pruned 2-D transforms: only the kept x-columns are nonzero, so the y-transforms run on those columns
        # (about 2/3 of them); the y-transformed fields land in a zero-padded workspace for the x-transforms
        n, kc = self.num_points, self.kept_columns
        # (the y-transforms run along the last axis of a (kept column, y) layout: contiguous, faster in MKL)
        padded = self._workspace(v_hat, "fields", (*v_hat.shape[:-2], 3, *v_hat.shape[-2:]))
        columns = self._workspace(v_hat, "columns", (*v_hat.shape[:-2], 3, kc, n))
        torch.mul(v_hat[..., :kc].transpose(-1, -2).unsqueeze(-3), arrays["PT"], out=columns)
        padded[..., :kc] = torch.fft.ifft(columns, dim=-1).transpose(-1, -2)
        fields = torch.fft.irfft(padded, n=n, dim=-1)
        flux = fields[..., :2, :, :] * fields[..., 2:3, :, :]
        flux_cols = self._workspace(v_hat, "flux", (*v_hat.shape[:-2], 2, kc, n))
        flux_cols.copy_(torch.fft.rfft(flux, dim=-1)[..., :kc].transpose(-1, -2))
        flux_hat = torch.fft.fft(flux_cols, dim=-1)  # (..., 2, column, y)
        div, kept = arrays["DT"], out[..., :kc].transpose(-1, -2)
        torch.mul(flux_hat[..., 0, :, :], div[0], out=kept).addcmul_(flux_hat[..., 1, :, :], div[1])
        if "F" in arrays:
            out[..., :kc].add_(arrays["F"])

    def _describe(self) -> dict[str, Any]:
        return {
            "nu": self.nu,
            "drag": self.drag,
            "forcing_mode": self.forcing_mode,
            "forcing_amplitude": self.forcing_amplitude,
        }


class KolmogorovFlowStepper(NavierStokes2DStepper):
    """Kolmogorov flow: :class:`NavierStokes2DStepper` with forcing on by default.

    Defaults follow the common benchmark (Kochkov et al. 2021 style): ``L = 2 pi``
    box, ``F = sin(4 y) e_x``, drag 0.1, ``nu = 1e-3``.

    Arguments:
        domain_extent: side length ``L``.
        num_points: grid points per axis.
        dt: time step.
        nu: viscosity.
        drag: linear drag.
        forcing_mode: forcing wave number ``n_f`` (>= 1).
        forcing_amplitude: forcing amplitude ``A``.
        **kwargs: ``dealias_fraction``, ``num_circle_points``, ``circle_radius``.
    """

    def __init__(
        self,
        domain_extent: float,
        num_points: int,
        dt: float,
        *,
        nu: float = 1e-3,
        drag: float = 0.1,
        forcing_mode: int = 4,
        forcing_amplitude: float = 1.0,
        **kwargs: Any,
    ) -> None:
        check_int("forcing_mode", forcing_mode, minimum=1)
        super().__init__(
            domain_extent,
            num_points,
            dt,
            nu=nu,
            drag=drag,
            forcing_mode=forcing_mode,
            forcing_amplitude=forcing_amplitude,
            **kwargs,
        )


def velocity_from_vorticity(vorticity: np.ndarray, domain_extent: float) -> tuple[np.ndarray, np.ndarray]:
    """Velocity of a periodic 2-D vorticity field via the streamfunction.

    Solves ``Laplacian(psi) = -w`` spectrally (mean of ``psi`` set to 0) and returns
    ``u = psi_y``, ``v = -psi_x``.  The mean velocity is zero by construction.

    Arguments:
        vorticity: real array of shape ``(..., N, N)`` indexed ``[..., y, x]``.
        domain_extent: side length ``L`` of the box.

    Returns:
        ``(u, v)``: the x and y velocity components, each of the shape and
        floating dtype of ``vorticity``.
    """
    domain_extent = check_real("domain_extent", domain_extent, 0.0, lo_open=True)
    w = np.asarray(vorticity)
    if w.ndim < 2 or w.shape[-1] != w.shape[-2]:
        raise ValueError(f"vorticity must have shape (..., N, N), got {w.shape}")
    n = w.shape[-1]
    dtype = w.dtype if w.dtype in (np.float32, np.float64) else np.float64
    scale = 2.0 * np.pi / domain_extent
    mx = np.arange(n // 2 + 1)
    my = np.fft.fftfreq(n, 1.0 / n).round()
    kx = scale * np.where(mx == n // 2, 0.0, mx) if n % 2 == 0 else scale * mx
    ky = scale * np.where(np.abs(my) == n // 2, 0.0, my) if n % 2 == 0 else scale * my
    kx2, ky2 = (scale * mx)[None, :] ** 2, (scale * my)[:, None] ** 2
    k2 = kx2 + ky2
    inv_k2 = np.divide(1.0, k2, out=np.zeros_like(k2), where=k2 > 0)
    psi_hat = np.fft.rfft2(w.astype(np.float64)) * inv_k2
    u = np.fft.irfft2(1j * ky[:, None] * psi_hat, s=(n, n))
    v = np.fft.irfft2(-1j * kx[None, :] * psi_hat, s=(n, n))
    return u.astype(dtype), v.astype(dtype)
