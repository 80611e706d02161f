"""Exponential time differencing (ETDRK4) on periodic domains: the shared machinery.

A semi-linear PDE ``u_t = L u + N(u)`` on the periodic box ``[0, domain_extent)^d``
sampled at ``num_points`` points per axis is advanced in Fourier space, where the
linear operator ``L`` is diagonal (one complex number per real-FFT mode):

    v = rfft(u);  v_t = L v + N(v)

One ETDRK4 step of size ``h`` (Cox & Matthews 2002, in the form of Kassam &
Trefethen 2005) reads, with ``E = exp(hL)`` and ``E2 = exp(hL/2)``::

    a  = E2 v + Q N(v)
    b  = E2 v + Q N(a)
    c  = E2 a + Q (2 N(b) - N(v))
    v' = E v + f1 N(v) + 2 f2 (N(a) + N(b)) + f3 N(c)

The coefficients ``Q, f1, f2, f3`` are ``h`` times phi-function combinations of
``z = hL`` that suffer catastrophic cancellation for small ``|z|``; they are
evaluated as the mean over ``M`` (default 32) points ``z + r_j`` of a circle of
radius 1 around each ``z`` in the complex plane (Cauchy's integral formula),
``r_j = exp(2 pi i (j - 1/2) / M)``, ``j = 1..M``.  The full circle is used and the
result is kept complex, so purely imaginary or complex operators (dispersion,
KdV) are handled correctly; for a real ``L`` the imaginary parts vanish to
rounding.  Coefficients are computed once, in float64, and cast to the dtype of
the state (complex64 for float32 input, complex128 for float64).

Conventions:
    * grid: ``x_j = j * domain_extent / num_points``, ``j = 0 .. num_points - 1``;
      in 2-D arrays are indexed ``[..., y, x]`` (image order, x along the last axis).
    * states are real arrays of shape ``(batch, *spatial)``; Fourier states are
      ``torch.fft.rfftn`` over the spatial axes (unnormalised), shape
      ``(batch, *fourier_shape)`` with ``fourier_shape = (N,) * (d - 1) + (N // 2 + 1,)``.
    * angular wavenumbers ``k = 2 pi m / domain_extent``; for odd-order derivatives
      the Nyquist mode (even ``N``) is set to zero.
    * nonlinear terms are dealiased with the 2/3 rule: modes with
      ``|m| > floor(dealias_fraction * (N // 2))`` are removed from the input of the
      nonlinearity and from its output (square truncation in 2-D); the stages only touch the
      ``kept_columns`` leading columns of the last Fourier axis (the others evolve by ``E``).

The transforms run in ``torch`` (its CPU FFT was the fastest of numpy.fft,
scipy.fft and torch.fft here), the element-wise stage arithmetic on the CPU in
the Numba loops of :mod:`lab.datasets.pde.fused`; the public API takes and
returns NumPy arrays (or torch tensors, which stay tensors).  While stepping,
torch runs single-threaded by default (the previous thread count is restored
afterwards): at these sizes intra-op threads gain little on an idle machine and
lose up to 10x on a busy one.  Set the environment variable ``LAB_PDE_THREADS``
to change it.
"""

from __future__ import annotations

import abc
import contextlib
import os
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

from lab.checks import bad_value, check_int, check_real

from .fused import fused_step

__all__ = ["SpectralStepper", "etdrk4_coefficients", "solver_threads", "stepping"]

ArrayLike = np.ndarray | torch.Tensor

_COMPLEX_OF = {torch.float32: torch.complex64, torch.float64: torch.complex128}


def solver_threads() -> int:
    """Torch threads of the solvers: ``$LAB_PDE_THREADS`` (default 1)."""
    raw = os.environ.get("LAB_PDE_THREADS", "1")
    try:
        return max(1, int(raw))
    except ValueError:
        raise bad_value("LAB_PDE_THREADS", raw, "a positive integer") from None


@contextlib.contextmanager
def stepping() -> Iterator[None]:
    """No autograd, and ``LAB_PDE_THREADS`` (default 1) torch threads, restored on exit."""
    previous = torch.get_num_threads()
    wanted = solver_threads()
    if wanted != previous:
        torch.set_num_threads(wanted)
    try:
        with torch.no_grad():
            yield
    finally:
        if wanted != previous:
            torch.set_num_threads(previous)


def etdrk4_coefficients(
    linear_operator: np.ndarray,
    dt: float,
    *,
    num_circle_points: int = 32,
    circle_radius: float = 1.0,
) -> dict[str, np.ndarray]:
    """ETDRK4 coefficients of Kassam & Trefethen (2005) by complex contour integrals.

    Arguments:
        linear_operator: complex or real array ``L`` of any shape (one value per
            Fourier mode).
        dt: time step ``h``.
        num_circle_points: number ``M`` of points on each contour.
        circle_radius: radius of the contour around each ``h L``.

    Returns:
        dict with complex128 arrays of the shape of ``linear_operator``: ``E``
        (``exp(hL)``), ``E2`` (``exp(hL/2)``), ``Q``, ``f1``, ``f2``, ``f3``.
    """
    dt = check_real("dt", dt, 0.0, lo_open=True)
    num_circle_points = check_int("num_circle_points", num_circle_points, minimum=4)
    circle_radius = check_real("circle_radius", circle_radius, 0.0, lo_open=True)
    hl = dt * np.asarray(linear_operator, dtype=np.complex128)
    j = np.arange(1, num_circle_points + 1)
    roots = circle_radius * np.exp(2j * np.pi * (j - 0.5) / num_circle_points)
    z = hl[..., None] + roots  # (..., M)
    ez = np.exp(z)
    z3 = z**3
    q = dt * np.mean((np.exp(z / 2) - 1.0) / z, axis=-1)
    f1 = dt * np.mean((-4.0 - z + ez * (4.0 - 3.0 * z + z * z)) / z3, axis=-1)
    f2 = dt * np.mean((2.0 + z + ez * (z - 2.0)) / z3, axis=-1)
    f3 = dt * np.mean((-4.0 - 3.0 * z - z * z + ez * (4.0 - z)) / z3, axis=-1)
    return {"E": np.exp(hl), "E2": np.exp(hl / 2), "Q": q, "f1": f1, "f2": f2, "f3": f3}


class SpectralStepper(abc.ABC):
    """Base class: one ETDRK4 step of ``u_t = L u + N(u)`` on a periodic box.

    Subclasses implement :meth:`_linear_operator` and, when the equation has one,
    :meth:`_nonlinear` (plus :meth:`_nonlinear_arrays` for the constant arrays it
    needs, and optionally :meth:`_nonlinear_factor`, a diagonal factor folded into
    the coefficients).  Calling the stepper advances a batch by one step of size ``dt``.

    Arguments:
        num_spatial_dims: 1 or 2.
        domain_extent: side length ``L`` of the periodic box ``[0, L)^d``.
        num_points: grid points ``N`` per axis (>= 4).
        dt: time step.
        dealias_fraction: fraction of the Nyquist mode index kept in the
            nonlinear term (2/3 rule by default; 1.0 disables dealiasing).
        num_circle_points: points ``M`` on the contour for the coefficients.
        circle_radius: radius of that contour.
    """

    #: whether the equation has a nonlinear (or forcing) term
    has_nonlinear: bool = True
    #: on the CPU, step with the fused Numba loops of :mod:`lab.datasets.pde.fused` (False: torch only; the same
    #: numbers to rounding)
    fused: bool = True

    def __init__(
        self,
        num_spatial_dims: int,
        domain_extent: float,
        num_points: int,
        dt: float,
        *,
        dealias_fraction: float = 2.0 / 3.0,
        num_circle_points: int = 32,
        circle_radius: float = 1.0,
    ) -> None:
        self.num_spatial_dims = check_int("num_spatial_dims", num_spatial_dims, minimum=1)
        if self.num_spatial_dims > 2:
            raise bad_value("num_spatial_dims", num_spatial_dims, "1 or 2")
        self.domain_extent = check_real("domain_extent", domain_extent, 0.0, lo_open=True)
        self.num_points = check_int("num_points", num_points, minimum=4)
        self.dt = check_real("dt", dt, 0.0, lo_open=True)
        self.dealias_fraction = check_real("dealias_fraction", dealias_fraction, 0.0, 1.0, lo_open=True)
        n, d = self.num_points, self.num_spatial_dims
        self.spatial_shape: tuple[int, ...] = (n,) * d
        self.fourier_shape: tuple[int, ...] = (n,) * (d - 1) + (n // 2 + 1,)
        self._axes = tuple(range(-d, 0))
        self.num_kept_modes = int(self.dealias_fraction * (n // 2))
        self.kept_columns = min(self.num_kept_modes + 1, self.fourier_shape[-1])  # the columns N reads and writes
        self.linear_operator = np.broadcast_to(
            np.asarray(self._linear_operator(), dtype=np.complex128), self.fourier_shape
        ).copy()
        self.coefficients = etdrk4_coefficients(
            self.linear_operator,
            self.dt,
            num_circle_points=num_circle_points,
            circle_radius=circle_radius,
        )
        self._tensor_cache: dict[tuple[torch.dtype, torch.device], dict[str, torch.Tensor]] = {}
        self._buffers: dict[tuple[Any, ...], torch.Tensor] = {}

    # ------------------------------------------------------------------ geometry
    @property
    def grid(self) -> np.ndarray:
        """Grid coordinates ``x_j = j L / N``; shape ``(N,)`` (the same on every axis)."""
        return np.arange(self.num_points) * (self.domain_extent / self.num_points)

    def mode_indices(self) -> tuple[np.ndarray, ...]:
        """Integer mode indices ``m`` per axis, broadcastable to ``fourier_shape``.

        Returns:
            1-D: ``(m_x,)`` with shape ``(N//2+1,)``; 2-D: ``(m_y, m_x)`` with shapes
            ``(N, 1)`` and ``(1, N//2+1)``.
        """
        n, d = self.num_points, self.num_spatial_dims
        mx = np.arange(n // 2 + 1)
        if d == 1:
            return (mx,)
        my = np.fft.fftfreq(n, 1.0 / n).round().astype(int)
        return (my[:, None], mx[None, :])

    def wavenumbers(self, *, odd_derivative: bool = False) -> tuple[np.ndarray, ...]:
        """Angular wavenumbers ``k = 2 pi m / L`` per axis (see :meth:`mode_indices`).

        Arguments:
            odd_derivative: zero the Nyquist mode (even ``N``), as appropriate for
                odd-order derivatives of real fields.

        Returns:
            tuple of float64 arrays broadcastable to ``fourier_shape``.
        """
        scale = 2.0 * np.pi / self.domain_extent
        out = []
        for m in self.mode_indices():
            k = scale * m.astype(np.float64)
            if odd_derivative and self.num_points % 2 == 0:
                k = np.where(np.abs(m) == self.num_points // 2, 0.0, k)
            out.append(k)
        return tuple(out)

    @property
    def dealias_mask(self) -> np.ndarray:
        """Boolean array of shape ``fourier_shape``: modes kept in the nonlinear term."""
        keep = np.ones(self.fourier_shape, dtype=bool)
        for m in self.mode_indices():
            keep = keep & (np.abs(m) <= self.num_kept_modes)
        return keep

    # ------------------------------------------------------------ to implement
    @abc.abstractmethod
    def _linear_operator(self) -> np.ndarray:
        """Diagonal linear operator ``L`` broadcastable to ``fourier_shape``."""

    def _nonlinear_arrays(self) -> dict[str, np.ndarray]:
        return {}  # constant arrays (complex or real) needed by :meth:`_nonlinear`

    def _nonlinear_factor(self) -> np.ndarray | None:
        """Optional diagonal factor ``G`` with ``N(v) = G * _nonlinear(v)``, folded into the ETDRK4
        coefficients once (one product less per stage); :meth:`_nonlinear` then returns the unscaled term."""
        return None

    def _nonlinear(self, v_hat: torch.Tensor, arrays: dict[str, torch.Tensor]) -> torch.Tensor:
        """Fourier transform of the nonlinear term ``N`` at state ``v_hat`` (divided by
        :meth:`_nonlinear_factor` when that is defined), on the kept columns only.

        Arguments:
            v_hat: Fourier state, shape ``(batch, *fourier_shape)``, dealiased along the
                last axis: its columns from :attr:`kept_columns` on are zero (it is a
                workspace of the stepper: read it, do not keep it).
            arrays: :meth:`_nonlinear_arrays` as tensors of the state's precision, cut
                to the kept columns (the leading :attr:`kept_columns` of the last axis).

        Returns:
            tensor of shape ``(batch, *fourier_shape[:-1], kept_columns)`` (``N`` is zero
            on the other columns).
        """
        raise NotImplementedError

    def _nonlinear_into(self, v_hat: torch.Tensor, arrays: dict[str, torch.Tensor], out: torch.Tensor) -> None:
        """:meth:`_nonlinear` into the leading :attr:`kept_columns` of ``out`` (``v_hat``'s shape)."""
        out[..., : self.kept_columns] = self._nonlinear(v_hat, arrays)

    def _workspace(self, like: torch.Tensor, name: str, shape: tuple[int, ...] | None = None, dtype: Any = None):
        """A zeroed buffer kept between steps (stage states keep their columns past :attr:`kept_columns` zero)."""
        shape, dtype = tuple(like.shape) if shape is None else shape, like.dtype if dtype is None else dtype
        key = (name, shape, dtype, like.device)
        buf = self._buffers.get(key)
        if buf is None:
            buf = self._buffers[key] = torch.zeros(shape, dtype=dtype, device=like.device)
        return buf

    # ---------------------------------------------------------------- stepping
    def _arrays(self, dtype: torch.dtype, device: torch.device) -> dict[str, torch.Tensor]:
        key = (dtype, device)
        cached = self._tensor_cache.get(key)
        if cached is None:
            cdtype = _COMPLEX_OF[dtype]
            coeffs = self.coefficients
            factor = self._nonlinear_factor() if self.has_nonlinear else None
            g = 1.0 if factor is None else np.asarray(factor, dtype=np.complex128)
            # coefficients multiplying N, with the factor G folded in (in float64); all but E act on the
            # kept columns only (N vanishes on the others)
            arrays = {
                "E": coeffs["E"],
                "E2": coeffs["E2"],
                "Q": coeffs["Q"] * g,
                "f1": coeffs["f1"] * g,
                "f2x2": 2.0 * coeffs["f2"] * g,
                "f3": coeffs["f3"] * g,
                **(self._nonlinear_arrays() if self.has_nonlinear else {}),
            }
            width, kept = self.fourier_shape[-1], self.kept_columns
            cached = {}
            for name, arr in arrays.items():
                arr = np.asarray(arr)
                if name != "E" and arr.ndim and arr.shape[-1] == width:
                    arr = np.ascontiguousarray(arr[..., :kept])
                if dtype == torch.float32:  # no subnormal coefficients (they are slow and meaningless)
                    arr = np.where(np.abs(arr) < 1e-30, 0, arr)
                tdtype = cdtype if np.iscomplexobj(arr) else dtype
                cached[name] = torch.as_tensor(arr).to(device=device, dtype=tdtype)
            self._tensor_cache[key] = cached
        return cached

    def _as_tensor(self, u: ArrayLike, name: str = "u") -> torch.Tensor:
        if isinstance(u, torch.Tensor):
            t = u.detach()
        else:
            arr = np.asarray(u)
            if arr.dtype not in (np.float32, np.float64):
                raise ValueError(f"{name} must be a float32 or float64 array, got dtype {arr.dtype}")
            t = torch.from_numpy(np.ascontiguousarray(arr))
        if t.dtype not in _COMPLEX_OF:
            raise ValueError(f"{name} must be a float32 or float64 array, got dtype {t.dtype}")
        expected = ("batch",) + self.spatial_shape
        if t.ndim != self.num_spatial_dims + 1 or tuple(t.shape[1:]) != self.spatial_shape:
            raise ValueError(f"{name} must have shape {expected}, got {tuple(t.shape)}")
        return t

    def to_fourier(self, u: torch.Tensor) -> torch.Tensor:
        """``rfftn`` over the spatial axes: ``(batch, *spatial)`` -> ``(batch, *fourier_shape)``."""
        return torch.fft.rfftn(u, dim=self._axes)

    def from_fourier(self, v_hat: torch.Tensor) -> torch.Tensor:
        """Inverse of :meth:`to_fourier`: ``(batch, *fourier_shape)`` -> ``(batch, *spatial)``."""
        return torch.fft.irfftn(v_hat, s=self.spatial_shape, dim=self._axes)

    def step_fourier(self, v_hat: torch.Tensor) -> torch.Tensor:
        """One ETDRK4 step in Fourier space.

        Arguments:
            v_hat: complex tensor ``(batch, *fourier_shape)`` (complex64 or complex128).

        Returns:
            the state one step ``dt`` later, same shape and dtype.
        """
        real = torch.float32 if v_hat.dtype == torch.complex64 else torch.float64
        c = self._arrays(real, v_hat.device)
        if not self.has_nonlinear:
            return c["E"] * v_hat
        if self.fused and v_hat.device.type == "cpu":
            return fused_step(self, v_hat.contiguous(), c)
        # the stages only need the kept columns (N reads and writes those); stage states go into two zero-padded
        # workspaces (a in one; v, b, c in the other) that the inverse transforms read as they are
        q, e2, kc = c["Q"], c["E2"], self.kept_columns
        pad_a, pad_b = self._workspace(v_hat, "a"), self._workspace(v_hat, "b")
        a, bc = pad_a[..., :kc], pad_b[..., :kc]
        vk = v_hat[..., :kc]
        bc.copy_(vk)
        nv = self._nonlinear(pad_b, c)
        e2v = e2 * vk
        torch.addcmul(e2v, q, nv, out=a)
        na = self._nonlinear(pad_a, c)
        torch.addcmul(e2v, q, na, out=bc)  # b = E2 v + Q N(a)
        nb = self._nonlinear(pad_b, c)
        torch.mul(e2, a, out=bc)  # c = E2 a + Q (2 N(b) - N(v))
        bc.addcmul_(q, nb, value=2.0).addcmul_(q, nv, value=-1.0)
        nc = self._nonlinear(pad_b, c)
        out = c["E"] * v_hat
        kept = out[..., :kc]
        kept.addcmul_(c["f1"], nv)
        kept.addcmul_(c["f2x2"], na.add_(nb))
        kept.addcmul_(c["f3"], nc)
        return out

    def __call__(self, u: ArrayLike) -> ArrayLike:
        """Advance a batch by one step ``dt``.

        Arguments:
            u: real array of shape ``(batch, *spatial)``, float32 or float64 (NumPy
                array or torch tensor).

        Returns:
            the next state, same shape, dtype and type as ``u``.
        """
        t = self._as_tensor(u)
        with stepping():
            out = self.from_fourier(self.step_fourier(self.to_fourier(t)))
        return out if isinstance(u, torch.Tensor) else out.numpy()

    def __repr__(self) -> str:
        extra = ", ".join(f"{k}={v!r}" for k, v in self._describe().items())
        return (
            f"{type(self).__name__}({self.domain_extent!r}, {self.num_points!r}, {self.dt!r}"
            + (f", {extra}" if extra else "")
            + ")"
        )

    def _describe(self) -> dict[str, Any]:
        """Keyword coefficients shown by ``repr`` and stored in data set attributes."""
        return {}

    @property
    def config(self) -> dict[str, Any]:
        """JSON-friendly description: class, geometry and coefficients."""
        return {
            "stepper": type(self).__name__,
            "num_spatial_dims": self.num_spatial_dims,
            "domain_extent": self.domain_extent,
            "num_points": self.num_points,
            "dt": self.dt,
            "dealias_fraction": self.dealias_fraction,
            **self._describe(),
        }
