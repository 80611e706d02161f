"""The ETDRK4 step on the CPU with its element-wise work fused into four Numba loops.

:meth:`~lab.datasets.pde.etdrk4.SpectralStepper.step_fourier` in torch spends about as long on its dozen small
element-wise products (one torch call each: dispatch, a fresh result, one pass over memory) as on its Fourier
transforms when the batch is small (1-D, 256 points).  Here the stage states are written by four loops (``a``, ``b``,
``c`` and the new state), straight into zero-padded workspaces that the inverse transforms read, and the transforms
write into persistent buffers: a step allocates only its result.  The arithmetic is the torch path's, term by term
in the same order (``E2 v + Q N(v)``, ...; complex products as ``(ac - bd, ad + bc)``, no fused multiply-adds), so
the two agree to rounding (the same bits in the bench cases; the rollouts and data sets are those of the torch-only
stepper before the fusion, bit for bit, on this machine).

States are viewed as ``(batch, rows, columns)``: ``rows`` is 1 in 1-D and ``N`` in 2-D, ``columns`` the last Fourier
axis, of which the stages touch the leading ``kept`` (the dealiased columns).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from numba import njit

__all__ = ["fused_step"]


@njit(cache=True, nogil=True)
def _stage(v, n, e2, q, dst):  # pragma: no cover - compiled
    """``dst[..., :kept] = E2 v + Q n`` (the stages ``a`` and ``b``)."""
    kept = q.shape[-1]
    for b in range(v.shape[0]):
        for r in range(v.shape[1]):
            for j in range(kept):
                dst[b, r, j] = e2[r, j] * v[b, r, j] + q[r, j] * n[b, r, j]


@njit(cache=True, nogil=True)
def _stage_c(a, nv, nb, e2, q, dst):  # pragma: no cover - compiled
    """``dst[..., :kept] = E2 a + 2 Q N(b) - Q N(v)``."""
    kept = q.shape[-1]
    for b in range(a.shape[0]):
        for r in range(a.shape[1]):
            for j in range(kept):
                qj = q[r, j]
                qnb = qj * nb[b, r, j]
                dst[b, r, j] = e2[r, j] * a[b, r, j] + (qnb + qnb) - qj * nv[b, r, j]


@njit(cache=True, nogil=True)
def _final(v, nv, na, nb, nc, e, f1, f2x2, f3, out, pad):  # pragma: no cover - compiled
    """``out = E v + f1 N(v) + 2 f2 (N(a) + N(b)) + f3 N(c)`` (the last three on the kept columns), and its kept
    columns copied into ``pad`` (the next step's input to the nonlinear term)."""
    kept = f1.shape[-1]
    width = v.shape[2]
    for b in range(v.shape[0]):
        for r in range(v.shape[1]):
            for j in range(kept):
                x = e[r, j] * v[b, r, j]
                x = x + f1[r, j] * nv[b, r, j]
                x = x + f2x2[r, j] * (na[b, r, j] + nb[b, r, j])
                x = x + f3[r, j] * nc[b, r, j]
                out[b, r, j] = x
                pad[b, r, j] = x
            for j in range(kept, width):
                out[b, r, j] = e[r, j] * v[b, r, j]


@njit(cache=True, nogil=True)
def _copy_kept(v, pad, kept):  # pragma: no cover - compiled
    for b in range(v.shape[0]):
        for r in range(v.shape[1]):
            for j in range(kept):
                pad[b, r, j] = v[b, r, j]


def _rows3(t: torch.Tensor, batch: int) -> np.ndarray:
    """NumPy view ``(batch, rows, columns)`` of a contiguous tensor sharing its memory."""
    return t.numpy().reshape(batch, -1, t.shape[-1])


def _workspaces(stepper: Any, v_hat: torch.Tensor, c: dict[str, torch.Tensor]) -> dict[str, Any]:
    key = ("fused", tuple(v_hat.shape), v_hat.dtype)
    ws = stepper._buffers.get(key)
    if ws is None:
        batch = v_hat.shape[0]
        pads = {name: stepper._workspace(v_hat, name) for name in ("a", "b")}
        ns = torch.zeros((4, *v_hat.shape), dtype=v_hat.dtype)
        rows = int(np.prod(v_hat.shape[1:-1], dtype=np.int64))

        def coef(name: str) -> np.ndarray:
            return np.ascontiguousarray(c[name].numpy().reshape(rows, -1))

        ws = {
            "pad_t": pads,
            "pad": {k: _rows3(t, batch) for k, t in pads.items()},
            "n_t": list(ns),
            "n": [_rows3(t, batch) for t in ns],
            **{name: coef(name) for name in ("E", "E2", "Q", "f1", "f2x2", "f3")},
        }
        stepper._buffers[key] = ws
    return ws


def fused_step(stepper: Any, v_hat: torch.Tensor, c: dict[str, torch.Tensor]) -> torch.Tensor:
    """One ETDRK4 step of ``stepper`` (a :class:`~lab.datasets.pde.etdrk4.SpectralStepper` on the CPU).

    Arguments:
        stepper: the stepper: its ``_nonlinear_rows(v_pad)`` (when defined) returns ``N`` as a NumPy array
            ``(batch, rows, >= kept columns)``, else its ``_nonlinear_into`` evaluates ``N`` into a buffer.
        v_hat: contiguous complex CPU tensor ``(batch, *fourier_shape)``.
        c: the stepper's coefficient tensors for this precision (``_arrays``).

    Returns:
        the state one step later (a new tensor).
    """
    batch = v_hat.shape[0]
    ws = _workspaces(stepper, v_hat, c)
    pad_t, pad, n_t, n = ws["pad_t"], ws["pad"], ws["n_t"], ws["n"]
    v = _rows3(v_hat, batch)
    kept = stepper.kept_columns
    direct = getattr(stepper, "_nonlinear_rows", None)

    def nonlinear(src: str, k: int) -> np.ndarray:
        if direct is not None:
            return direct(pad_t[src])
        stepper._nonlinear_into(pad_t[src], c, n_t[k])
        return n[k]

    _copy_kept(v, pad["b"], kept)
    nv = nonlinear("b", 0)
    _stage(v, nv, ws["E2"], ws["Q"], pad["a"])
    na = nonlinear("a", 1)
    _stage(v, na, ws["E2"], ws["Q"], pad["b"])
    nb = nonlinear("b", 2)
    _stage_c(pad["a"], nv, nb, ws["E2"], ws["Q"], pad["b"])
    nc = nonlinear("b", 3)
    out = torch.empty_like(v_hat)
    _final(v, nv, na, nb, nc, ws["E"], ws["f1"], ws["f2x2"], ws["f3"], _rows3(out, batch), pad["b"])
    return out
