"""Initial-condition distributions of the standard PDE benchmarks.

* :func:`random_sines` - LPSDA (Brandstetter et al. 2022) sums of sines
  ``u0(x) = sum_{k=1}^{J} A_k sin(2 pi l_k x / L + phi_k)`` with
  ``A_k ~ U[-a, a)``, ``l_k`` uniform on ``{l_min .. l_max}`` and
  ``phi_k ~ U[0, 2 pi)`` (LPSDA: ``J = 10``, ``a = 0.5``, ``l in {1, 2}``).
* :func:`ks_initial_condition` - random sines advanced onto the
  Kuramoto-Sivashinsky attractor by a discarded warm-up.
* :func:`random_vorticity` - band-limited random 2-D vorticity (Gaussian white
  noise filtered to the annulus ``m_min <= |m| <= m_max`` of integer wave
  vectors), scaled per sample to a given RMS velocity.
* :func:`taylor_green_vorticity` - the Taylor-Green vortex (exact solution).

All random draws come from a caller-supplied :class:`numpy.random.Generator`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lab.checks import check_int, check_real

from .etdrk4 import SpectralStepper
from .rollout import advance
from .steppers import velocity_from_vorticity

__all__ = [
    "ks_initial_condition",
    "random_sine_parameters",
    "random_sines",
    "random_vorticity",
    "sine_series",
    "taylor_green_vorticity",
]


def _check_rng(rng: Any) -> np.random.Generator:
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"rng must be a numpy.random.Generator (np.random.default_rng(seed)), got {rng!r}")
    return rng


def random_sine_parameters(
    rng: np.random.Generator,
    batch: int,
    *,
    num_terms: int = 10,
    amplitude: float = 0.5,
    min_wavenumber: int = 1,
    max_wavenumber: int = 2,
) -> dict[str, np.ndarray]:
    """Draw the parameters of :func:`random_sines`.

    Arguments:
        rng: random generator.
        batch: number of samples.
        num_terms: ``J``, sines per sample.
        amplitude: ``a``; amplitudes are ``U[-a, a)``.
        min_wavenumber: smallest integer wave number ``l``.
        max_wavenumber: largest integer wave number ``l`` (inclusive).

    Returns:
        dict with ``amplitudes`` (float64), ``wavenumbers`` (int64) and ``phases``
        (float64), each of shape ``(batch, num_terms)``.
    """
    rng = _check_rng(rng)
    batch = check_int("batch", batch, minimum=1)
    num_terms = check_int("num_terms", num_terms, minimum=1)
    amplitude = check_real("amplitude", amplitude, 0.0)
    min_wavenumber = check_int("min_wavenumber", min_wavenumber, minimum=1)
    max_wavenumber = check_int("max_wavenumber", max_wavenumber, minimum=min_wavenumber)
    return {
        "amplitudes": rng.uniform(-amplitude, amplitude, size=(batch, num_terms)),
        "wavenumbers": rng.integers(min_wavenumber, max_wavenumber + 1, size=(batch, num_terms)),
        "phases": rng.uniform(0.0, 2.0 * np.pi, size=(batch, num_terms)),
    }


def sine_series(
    x: np.ndarray,
    domain_extent: float,
    amplitudes: np.ndarray,
    wavenumbers: np.ndarray,
    phases: np.ndarray,
) -> np.ndarray:
    """Evaluate ``sum_k A_k sin(2 pi l_k x / L + phi_k)``.

    Arguments:
        x: points, shape ``(P,)``.
        domain_extent: ``L``.
        amplitudes, wavenumbers, phases: shape ``(batch, J)`` each.

    Returns:
        float64 array of shape ``(batch, P)``.
    """
    x = np.asarray(x, dtype=np.float64)
    kappa = 2.0 * np.pi * np.asarray(wavenumbers, dtype=np.float64) / domain_extent
    arg = kappa[:, :, None] * x[None, None, :] + np.asarray(phases)[:, :, None]
    return np.einsum("bj,bjp->bp", np.asarray(amplitudes, dtype=np.float64), np.sin(arg))


def random_sines(
    rng: np.random.Generator,
    batch: int,
    num_points: int,
    domain_extent: float,
    *,
    num_terms: int = 10,
    amplitude: float = 0.5,
    min_wavenumber: int = 1,
    max_wavenumber: int = 2,
    dtype: Any = np.float64,
) -> np.ndarray:
    """LPSDA random sine sums on the grid ``x_j = j L / N``.

    Arguments:
        rng: random generator.
        batch: number of samples.
        num_points: grid points ``N``.
        domain_extent: ``L``.
        num_terms, amplitude, min_wavenumber, max_wavenumber: see
            :func:`random_sine_parameters`.
        dtype: output dtype.

    Returns:
        array of shape ``(batch, N)``.
    """
    num_points = check_int("num_points", num_points, minimum=4)
    domain_extent = check_real("domain_extent", domain_extent, 0.0, lo_open=True)
    params = random_sine_parameters(
        rng,
        batch,
        num_terms=num_terms,
        amplitude=amplitude,
        min_wavenumber=min_wavenumber,
        max_wavenumber=max_wavenumber,
    )
    x = np.arange(num_points) * (domain_extent / num_points)
    return sine_series(x, domain_extent, **params).astype(dtype)


def ks_initial_condition(
    stepper: SpectralStepper,
    rng: np.random.Generator,
    batch: int,
    *,
    warmup_steps: int = 500,
    dtype: Any = np.float64,
    **sine_options: Any,
) -> np.ndarray:
    """States on the Kuramoto-Sivashinsky attractor: random sines, then a discarded warm-up.

    Arguments:
        stepper: the KS stepper (its ``dt`` sets the warm-up time
            ``warmup_steps * dt``; APEBench uses 500 steps of 0.1).
        rng: random generator.
        batch: number of samples.
        warmup_steps: solver steps discarded.
        dtype: precision used for the warm-up and the output.
        **sine_options: passed to :func:`random_sines`.

    Returns:
        array of shape ``(batch, N)``.
    """
    warmup_steps = check_int("warmup_steps", warmup_steps, minimum=0)
    u0 = random_sines(rng, batch, stepper.num_points, stepper.domain_extent, dtype=dtype, **sine_options)
    return advance(stepper, u0, warmup_steps)


def random_vorticity(
    rng: np.random.Generator,
    batch: int,
    num_points: int,
    domain_extent: float = 2.0 * np.pi,
    *,
    min_mode: float = 1.0,
    max_mode: float = 4.0,
    velocity_rms: float = 1.0,
    dtype: Any = np.float64,
) -> np.ndarray:
    """Band-limited random vorticity fields (zero mean), e.g. for decaying turbulence.

    Gaussian white noise is filtered to the integer wave vectors ``m`` with
    ``min_mode <= |m| <= max_mode`` and each sample is scaled so that its velocity
    (:func:`velocity_from_vorticity`) has RMS ``velocity_rms`` over both components,
    i.e. ``sqrt(mean(u^2 + v^2)) = velocity_rms``.

    Arguments:
        rng: random generator.
        batch: number of samples.
        num_points: grid points ``N`` per axis.
        domain_extent: side length ``L``.
        min_mode: inner radius of the annulus (in mode numbers, > 0).
        max_mode: outer radius (>= ``min_mode``).
        velocity_rms: target RMS speed (> 0).
        dtype: output dtype.

    Returns:
        array of shape ``(batch, N, N)`` indexed ``[b, y, x]``.
    """
    rng = _check_rng(rng)
    batch = check_int("batch", batch, minimum=1)
    num_points = check_int("num_points", num_points, minimum=4)
    domain_extent = check_real("domain_extent", domain_extent, 0.0, lo_open=True)
    min_mode = check_real("min_mode", min_mode, 0.0, lo_open=True)
    max_mode = check_real("max_mode", max_mode, 0.0, lo_open=True)
    if max_mode < min_mode:
        raise ValueError(f"max_mode must be >= min_mode={min_mode}, got {max_mode!r}")
    if max_mode > num_points // 2:
        raise ValueError(f"max_mode must be <= num_points // 2 = {num_points // 2}, got {max_mode!r}")
    velocity_rms = check_real("velocity_rms", velocity_rms, 0.0, lo_open=True)
    n = num_points
    noise = rng.standard_normal((batch, n, n))
    my = np.fft.fftfreq(n, 1.0 / n)[:, None]
    mx = np.arange(n // 2 + 1)[None, :]
    radius = np.sqrt(mx**2 + my**2)
    band = (radius >= min_mode) & (radius <= max_mode)
    w = np.fft.irfft2(np.fft.rfft2(noise) * band, s=(n, n))
    u, v = velocity_from_vorticity(w, domain_extent)
    rms = np.sqrt(np.mean(u**2 + v**2, axis=(-2, -1), keepdims=True))
    return (w * (velocity_rms / rms)).astype(dtype)


def taylor_green_vorticity(
    num_points: int,
    domain_extent: float = 2.0 * np.pi,
    t: float = 0.0,
    *,
    nu: float = 0.0,
    drag: float = 0.0,
    mode: int = 1,
    amplitude: float = 1.0,
) -> np.ndarray:
    """Taylor-Green vortex, an exact solution of 2-D Navier-Stokes.

    Velocity ``u = A sin(kx) cos(ky)``, ``v = -A cos(kx) sin(ky)`` with
    ``k = 2 pi mode / L``; vorticity ``w = 2 A k sin(kx) sin(ky)``.  Its advection
    term vanishes identically, so ``w(t) = w(0) exp(-(2 nu k^2 + drag) t)``.

    Arguments:
        num_points: grid points ``N`` per axis.
        domain_extent: side length ``L``.
        t: time.
        nu: viscosity.
        drag: linear drag.
        mode: integer wave number.
        amplitude: velocity amplitude ``A``.

    Returns:
        float64 array of shape ``(N, N)`` indexed ``[y, x]``.
    """
    num_points = check_int("num_points", num_points, minimum=4)
    mode = check_int("mode", mode, minimum=1)
    k = 2.0 * np.pi * mode / check_real("domain_extent", domain_extent, 0.0, lo_open=True)
    g = np.arange(num_points) * (domain_extent / num_points)
    y, x = np.meshgrid(g, g, indexing="ij")
    decay = np.exp(-(2.0 * check_real("nu", nu, 0.0) * k**2 + check_real("drag", drag)) * t)
    return 2.0 * amplitude * k * np.sin(k * x) * np.sin(k * y) * decay
