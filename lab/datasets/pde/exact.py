"""Exact solutions used to validate the solvers.

* :func:`heat_exact` - Fourier modes of ``u_t = nu Laplacian(u)`` decay as
  ``exp(-nu |k|^2 t)``.
* :func:`kdv_soliton` - one-soliton of ``u_t + a u u_x + b u_xxx = 0``:
  ``u = (3 c / a) sech^2( (1/2) sqrt(c / b) (x - c t - x0) )`` (``a = 6, b = 1`` gives
  the textbook ``(c/2) sech^2(sqrt(c)/2 (x - c t))``), wrapped onto the periodic
  domain (exact up to the ``~exp(-sqrt(c/b) L / 2)`` overlap of its images).
* :func:`burgers_cole_hopf` - viscous Burgers ``u_t + u u_x = nu u_xx`` from the
  Cole-Hopf transform in quadrature form::

      u(x, t) = int (x - y)/t exp(-Phi/(2 nu)) dy / int exp(-Phi/(2 nu)) dy,
      Phi(x, y) = F(y) + (x - y)^2 / (2 t),   F(y) = int_0^y u0(s) ds,

  evaluated with the exponent shifted by its minimum over ``y`` (so small ``nu``
  does not overflow, unlike the Fourier/heat-equation route whose ``exp(-F/2nu)``
  spans ``e^{+-100}`` at ``nu = 0.01``).  ``F`` is the exact antiderivative of the
  band-limited grid function ``u0`` (spectral), the integral is the trapezoid rule
  on a fine periodic grid over the window where the Gaussian factor matters.  A
  nonzero mean ``c`` is handled by Galilean invariance.
"""

from __future__ import annotations

import math

import numpy as np

from lab.checks import check_int, check_real

__all__ = ["burgers_cole_hopf", "heat_exact", "kdv_soliton"]


def heat_exact(
    u0: np.ndarray,
    domain_extent: float,
    nu: float,
    t: float,
    *,
    num_spatial_dims: int = 1,
) -> np.ndarray:
    """Exact heat-equation solution from grid data (spectral; exact for grid functions).

    Arguments:
        u0: real array ``(..., *spatial)``.
        domain_extent: side length ``L``.
        nu: diffusivity.
        t: time (>= 0).
        num_spatial_dims: 1 or 2 trailing spatial axes.

    Returns:
        float64 array of the shape of ``u0``.
    """
    domain_extent = check_real("domain_extent", domain_extent, 0.0, lo_open=True)
    nu = check_real("nu", nu, 0.0)
    t = check_real("t", t, 0.0)
    d = check_int("num_spatial_dims", num_spatial_dims, minimum=1)
    u0 = np.asarray(u0, dtype=np.float64)
    axes = tuple(range(-d, 0))
    shape = u0.shape[-d:]
    k2 = np.zeros(shape[:-1] + (shape[-1] // 2 + 1,))
    for i, n in enumerate(shape):
        if i == d - 1:
            m = np.arange(n // 2 + 1)
        else:
            m = np.fft.fftfreq(n, 1.0 / n)
        view = [1] * d
        view[i] = m.size
        k2 = k2 + (2.0 * np.pi * m / domain_extent).reshape(view) ** 2
    return np.fft.irfftn(np.fft.rfftn(u0, axes=axes) * np.exp(-nu * k2 * t), s=shape, axes=axes)


def kdv_soliton(
    x: np.ndarray,
    t: float,
    *,
    speed: float,
    x0: float = 0.0,
    domain_extent: float | None = None,
    convection: float = 1.0,
    dispersion: float = 1.0,
) -> np.ndarray:
    """One-soliton of ``u_t + convection u u_x + dispersion u_xxx = 0``.

    Arguments:
        x: points, any shape.
        t: time.
        speed: ``c`` (``c / dispersion > 0``).
        x0: position at ``t = 0``.
        domain_extent: if given, the soliton is wrapped onto ``[0, L)``.
        convection: ``a`` (nonzero).
        dispersion: ``b``.

    Returns:
        float64 array of the shape of ``x``.
    """
    speed = check_real("speed", speed)
    convection = check_real("convection", convection)
    dispersion = check_real("dispersion", dispersion)
    if convection == 0 or dispersion == 0 or speed / dispersion <= 0:
        raise ValueError(
            f"speed / dispersion must be > 0 and convection nonzero, got speed={speed}, "
            f"dispersion={dispersion}, convection={convection}"
        )
    xi = np.asarray(x, dtype=np.float64) - speed * t - x0
    if domain_extent is not None:
        L = check_real("domain_extent", domain_extent, 0.0, lo_open=True)
        xi = (xi + L / 2) % L - L / 2
    kappa = 0.5 * math.sqrt(speed / dispersion)
    return (3.0 * speed / convection) / np.cosh(kappa * xi) ** 2


def burgers_cole_hopf(
    u0: np.ndarray,
    domain_extent: float,
    nu: float,
    t: float,
    *,
    points_per_width: int = 8,
    min_oversample: int = 8,
) -> np.ndarray:
    """Exact viscous Burgers solution on a periodic domain (quadrature Cole-Hopf).

    Arguments:
        u0: initial data on the grid ``x_j = j L / N``, shape ``(batch, N)`` or ``(N,)``
            (treated as the band-limited periodic function it samples).
        domain_extent: ``L``.
        nu: viscosity (> 0).
        t: time (> 0).
        points_per_width: quadrature points per width of the narrowest peak of
            the integrand, ``sqrt(2 nu / (max u0' + 1/t))``.
        min_oversample: quadrature grid at least this many times finer than ``N``.

    Returns:
        float64 array ``u(x_j, t)`` of the shape of ``u0``.
    """
    L = check_real("domain_extent", domain_extent, 0.0, lo_open=True)
    nu = check_real("nu", nu, 0.0, lo_open=True)
    t = check_real("t", t, 0.0, lo_open=True)
    points_per_width = check_int("points_per_width", points_per_width, minimum=2)
    min_oversample = check_int("min_oversample", min_oversample, minimum=1)
    u0 = np.asarray(u0, dtype=np.float64)
    squeeze = u0.ndim == 1
    batch = np.atleast_2d(u0)
    n = batch.shape[-1]
    x = np.arange(n) * (L / n)
    out = np.empty_like(batch)
    for b, row in enumerate(batch):
        mean = row.mean()
        w0 = row - mean
        # Galilean shift: u(x, t) = mean + w(x - mean t, t)
        out[b] = mean + _cole_hopf_zero_mean(w0, L, nu, t, x - mean * t, points_per_width, min_oversample)
    return out[0] if squeeze else out


def _cole_hopf_zero_mean(
    w0: np.ndarray,
    L: float,
    nu: float,
    t: float,
    x_eval: np.ndarray,
    points_per_width: int,
    min_oversample: int,
) -> np.ndarray:
    n = w0.size
    w_hat = np.fft.rfft(w0)
    k = 2.0 * np.pi * np.arange(n // 2 + 1) / L
    if n % 2 == 0:
        w_hat[-1] = 0.0  # the Nyquist cosine has no periodic antiderivative on the grid
    deriv_max = float(np.max(np.fft.irfft(1j * k * w_hat, n=n)))
    width = math.sqrt(2.0 * nu / max(deriv_max + 1.0 / t, 1.0 / t))
    fine = max(min_oversample * n, int(math.ceil(points_per_width * L / width)))
    fine += fine % 2
    f_hat = np.zeros(fine // 2 + 1, dtype=np.complex128)
    f_hat[1 : n // 2 + 1] = w_hat[1:] / (1j * k[1:])
    F = np.fft.irfft(f_hat, n=fine) * (fine / n)  # antiderivative on the fine grid (up to a constant)
    dy = L / fine
    # Gaussian factor exp(-(x-y)^2/(4 nu t)) relative to the F-variation: window half-width R
    spread = float(F.max() - F.min())
    R = math.sqrt(2.0 * t * (spread + 80.0 * nu)) + 2.0 * dy
    j = np.arange(int(math.floor(-R / dy)), int(math.ceil((L + R) / dy)) + 1)
    y = j * dy
    Fy = F[np.mod(j, fine)]
    x_eval = np.mod(x_eval, L)
    out = np.empty_like(x_eval)
    rows = max(1, 2_000_000 // y.size)
    for start in range(0, x_eval.size, rows):
        xs = x_eval[start : start + rows, None]
        phi = Fy[None, :] + (xs - y[None, :]) ** 2 / (2.0 * t)
        phi -= phi.min(axis=1, keepdims=True)
        weight = np.exp(-phi / (2.0 * nu))
        out[start : start + rows] = ((xs - y[None, :]) / t * weight).sum(axis=1) / weight.sum(axis=1)
    return out
