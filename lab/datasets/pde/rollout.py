"""Running a stepper: :func:`rollout` (the trajectory of saved frames) and :func:`advance` (the final state only).

Both serve any callable ``u -> u_next`` on batches; a :class:`~lab.datasets.pde.etdrk4.SpectralStepper` stays in
Fourier space between steps (one inverse transform per saved frame), under :func:`~lab.datasets.pde.etdrk4.stepping`
(no autograd, the solvers' thread count).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from lab.checks import check_int

from .etdrk4 import ArrayLike, SpectralStepper, stepping

__all__ = ["advance", "rollout"]


def _iter_progress(total: int, progress: bool, desc: str):
    if not progress:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="step", leave=False)


def rollout(
    stepper: Callable[[ArrayLike], ArrayLike],
    u0: ArrayLike,
    n: int,
    *,
    include_init: bool = True,
    progress: bool = False,
    substeps: int = 1,
) -> ArrayLike:
    """Trajectory of ``n`` saved steps from ``u0``.

    For a :class:`SpectralStepper` the state stays in Fourier space between steps
    (one inverse transform per saved frame); any other callable ``u -> u_next`` on
    batches is applied repeatedly.

    Arguments:
        stepper: a :class:`SpectralStepper` or callable mapping ``(batch, *spatial)``
            to the same shape.
        u0: initial states, shape ``(batch, *spatial)``.
        n: number of saved steps (>= 0).
        include_init: prepend ``u0`` to the output.
        progress: show a ``tqdm.auto`` progress bar.
        substeps: solver steps per saved frame (saved frames are ``substeps * dt``
            apart).

    Returns:
        array of shape ``(batch, n + 1, *spatial)`` (``(batch, n, *spatial)`` when
        ``include_init=False``), same dtype and type (NumPy / torch) as ``u0``.
    """
    n = check_int("n", n, minimum=0)
    substeps = check_int("substeps", substeps, minimum=1)
    is_tensor = isinstance(u0, torch.Tensor)
    offset = 1 if include_init else 0
    bar = _iter_progress(n, progress, f"rollout {type(stepper).__name__}")
    try:
        if isinstance(stepper, SpectralStepper):
            u = stepper._as_tensor(u0, "u0")
            out = torch.empty((u.shape[0], n + offset) + tuple(u.shape[1:]), dtype=u.dtype, device=u.device)
            if include_init:
                out[:, 0] = u
            with stepping():
                v = stepper.to_fourier(u)
                for i in range(n):
                    for _ in range(substeps):
                        v = stepper.step_fourier(v)
                    out[:, i + offset] = stepper.from_fourier(v)
                    if bar is not None:
                        bar.update(1)
            return out if is_tensor else out.numpy()
        frames = [u0] if include_init else []
        u = u0
        for _ in range(n):
            for _ in range(substeps):
                u = stepper(u)
            frames.append(u)
            if bar is not None:
                bar.update(1)
        if not frames:
            shape = (u0.shape[0], 0) + tuple(u0.shape[1:])
            return torch.empty(shape, dtype=u0.dtype) if is_tensor else np.empty(shape, dtype=np.asarray(u0).dtype)
        if is_tensor:
            return torch.stack(frames, dim=1)
        return np.stack([np.asarray(f) for f in frames], axis=1)
    finally:
        if bar is not None:
            bar.close()


def advance(stepper: Callable[[ArrayLike], ArrayLike], u0: ArrayLike, n: int) -> ArrayLike:
    """Final state after ``n`` steps, without storing the trajectory (e.g. a warm-up).

    Arguments:
        stepper: a :class:`SpectralStepper` or callable on batches.
        u0: initial states, shape ``(batch, *spatial)``.
        n: number of steps (>= 0).

    Returns:
        array of the shape, dtype and type of ``u0``.
    """
    n = check_int("n", n, minimum=0)
    if isinstance(stepper, SpectralStepper):
        u = stepper._as_tensor(u0, "u0")
        with stepping():
            v = stepper.to_fourier(u)
            for _ in range(n):
                v = stepper.step_fourier(v)
            out = stepper.from_fourier(v)
        return out if isinstance(u0, torch.Tensor) else out.numpy()
    u = u0
    for _ in range(n):
        u = stepper(u)
    return u
