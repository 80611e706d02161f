"""The backends of :func:`kernels.linear_scan`, all on ``(N, T, M)`` views of the tensors (the layout plan of
:mod:`kernels.linear_scan`): ``forward(a3, b3, h02, out3, reverse)`` fills ``out3``;
``backward(a3, h3, g3, h02, da3, db3, dh02, reverse)`` fills the gradients.

* ``numba``: the CPU kernels of :mod:`kernels._numba.linear_scan` and :mod:`kernels._numba.linear_scan_backward`
  (plus :func:`numba_rows_out`, the short path of ``linear_scan(..., out=)`` for the common layout);
* ``triton``: the GPU kernels of :mod:`kernels._triton.linear_scan`;
* ``torch``: a readable loop; ``pscan``: a log-depth Blelloch scan in torch (:func:`_blelloch`).

Backends without a backward kernel build theirs from their forward (:func:`_generic_backward`): the adjoint scan runs
the other way with shifted, conjugated coefficients.
"""

from __future__ import annotations

import numpy as np
import torch

from ._common import numba_threads_for

__all__ = ["BACKWARD", "FORWARD", "numba_rows_out"]


def _plain(x: torch.Tensor) -> torch.Tensor:
    """Detached, with lazy conjugation/negation materialised (NumPy cannot see those bits)."""
    return x.detach().resolve_conj().resolve_neg()



def _numba_forward(a3, b3, h02, out3, reverse):
    from ._numba import linear_scan as nk

    a3, b3, h02 = _plain(a3), _plain(b3), _plain(h02)
    with numba_threads_for(b3.numel()):
        if b3.shape[2] == 1:
            nk.scan_rows_forward(  # the 2-D views taken in NumPy (torch's slicing costs ~2.5 us a tensor)
                a3.numpy()[:, :, 0], b3.numpy()[:, :, 0], h02.numpy()[:, 0], out3.numpy()[:, :, 0], reverse
            )
        else:
            nk.scan_channels_forward(a3.numpy(), b3.numpy(), h02.numpy(), out3.numpy(), reverse)


def _numba_backward(a3, h3, g3, h02, da3, db3, dh02, reverse):
    from ._numba import linear_scan_backward as nk

    a3, h3, g3, h02 = _plain(a3), _plain(h3), _plain(g3), _plain(h02)
    with numba_threads_for(2 * g3.numel()):
        if g3.shape[2] == 1:
            nk.scan_rows_backward(
                a3.numpy()[:, :, 0], h3.numpy()[:, :, 0], g3.numpy()[:, :, 0], h02.numpy()[:, 0],
                da3.numpy()[:, :, 0], db3.numpy()[:, :, 0], dh02.numpy()[:, 0], reverse,
            )  # fmt: skip
        else:
            nk.scan_channels_backward(
                a3.numpy(), h3.numpy(), g3.numpy(), h02.numpy(), da3.numpy(), db3.numpy(), dh02.numpy(), reverse
            )


_ZEROS: dict = {}  # NumPy dtype -> a zeros vector, grown on demand: the fast path's h0, which the kernel only
# reads (not flagged read-only: numba would compile a second specialisation for a read-only array)


def _zeros(n: int, dtype):
    z = _ZEROS.get(dtype)
    if z is None or z.shape[0] < n:
        z = np.zeros(max(n, 1024), dtype)
        _ZEROS[dtype] = z
    return z[:n]


def numba_rows_out(a, b, h0, out, dim, reverse) -> bool:
    """``linear_scan(..., out=)`` on the Numba backend for the common layout (``a``, ``b`` and ``out`` contiguous,
    ``a`` of ``b``'s shape, the scan axis last, no ``h0``): straight to the row kernel on NumPy views. Returns False
    (nothing done) for any other layout, which takes the general path.

    The general path's layout plan, permuted views, ``h0`` zeros and detaching are ~15 small torch calls; with the
    caches cold (as after another kernel has streamed memory) they took ~0.3 ms together, 13% of a 256x64x256 scan
    (``lab bench scan``'s ``short`` case), against ~0.1 ms for this path.
    """
    if dim != b.dim() - 1 or h0 is not None or a.shape != b.shape or b.numel() == 0:
        return False
    if not (a.is_contiguous() and b.is_contiguous() and out.is_contiguous()):
        return False
    if a.is_conj() or b.is_conj() or a.is_neg() or b.is_neg():
        return False
    from ._numba import linear_scan as nk

    t = b.shape[-1]
    bn = b.detach().numpy().reshape(-1, t)
    with numba_threads_for(bn.size):
        nk.scan_rows_forward(a.detach().numpy().reshape(-1, t), bn, _zeros(bn.shape[0], bn.dtype),
                             out.numpy().reshape(-1, t), reverse)  # fmt: skip
    return True


def _torch_forward(a3, b3, h02, out3, reverse):
    h = h02
    steps = range(b3.shape[1] - 1, -1, -1) if reverse else range(b3.shape[1])
    for t in steps:
        h = torch.addcmul(b3[:, t], a3[:, t], h)
        out3[:, t] = h


def _triton_forward(a3, b3, h02, out3, reverse):
    from ._triton import linear_scan as tk

    tk.scan_forward(a3, b3, h02, out3, reverse)


def _triton_backward(a3, h3, g3, h02, da3, db3, dh02, reverse):
    if g3.is_complex():  # the complex adjoint is built from forward scans
        return _generic_backward(_triton_forward)(a3, h3, g3, h02, da3, db3, dh02, reverse)
    from ._triton import linear_scan as tk

    tk.scan_backward(a3, h3, g3.contiguous(), h02, da3, db3, dh02, reverse)


def _pscan_forward(a3, b3, h02, out3, reverse):
    out3.copy_(_blelloch(a3, b3, h02, reverse))


def _generic_backward(forward):
    """Backward built from a forward scan: the adjoint scan runs the other way with shifted coefficients."""

    def backward(a3, h3, g3, h02, da3, db3, dh02, reverse):
        n, t, m = g3.shape
        if t == 0:
            dh02.zero_()
            return
        coef = torch.zeros_like(g3)  # coefficient of d_{next} in d_t = g_t + conj(a_next) d_next
        hprev = torch.empty_like(g3)
        if reverse:  # forward ran t = T-1 .. 0: the "next" step is t-1, the predecessor state is h_{t+1}
            coef[:, 1:] = a3[:, :-1].conj()
            hprev[:, :-1] = h3[:, 1:]
            hprev[:, -1] = h02
            first = t - 1
        else:
            coef[:, :-1] = a3[:, 1:].conj()
            hprev[:, 1:] = h3[:, :-1]
            hprev[:, 0] = h02
            first = 0
        zeros = torch.zeros_like(h02)
        forward(coef, g3.contiguous(), zeros, db3, not reverse)
        torch.mul(db3, hprev.conj(), out=da3)
        torch.mul(a3[:, first].conj(), db3[:, first], out=dh02)

    return backward


FORWARD = {"numba": _numba_forward, "torch": _torch_forward, "triton": _triton_forward, "pscan": _pscan_forward}
BACKWARD = {
    "numba": _numba_backward,
    "torch": _generic_backward(_torch_forward),
    "triton": _triton_backward,
    "pscan": _generic_backward(_pscan_forward),
}



def _blelloch(a3: torch.Tensor, b3: torch.Tensor, h02: torch.Tensor, reverse: bool) -> torch.Tensor:
    """Inclusive scan of ``(N, T, M)`` tensors along axis 1 by Blelloch's up-sweep/down-sweep, in place on copies.

    The length is padded to a power of two with identity elements ``(a, b) = (1, 0)`` at the end.
    """
    if reverse:
        return _blelloch(a3.flip(1), b3.flip(1), h02, False).flip(1)
    n, t, m = b3.shape
    size = 1 << max(0, (t - 1).bit_length())
    A = torch.ones(n, size, m, dtype=b3.dtype, device=b3.device)
    B = torch.zeros(n, size, m, dtype=b3.dtype, device=b3.device)
    A[:, :t] = a3
    B[:, :t] = b3
    B[:, 0] += A[:, 0] * h02  # fold the initial state into the first input
    # up-sweep: after level k, position i (with i+1 a multiple of 2^(k+1)) holds the combine of its block
    step = 1
    while step < size:
        right = slice(2 * step - 1, size, 2 * step)
        left = slice(step - 1, size, 2 * step)
        B[:, right] += A[:, right] * B[:, left]
        A[:, right] *= A[:, left]
        step *= 2
    # down-sweep (inclusive form): fill the middle of every block from the prefix ending just before it
    step = size // 4
    while step >= 1:
        mid = slice(3 * step - 1, size, 2 * step)
        prev = slice(2 * step - 1, size - step, 2 * step)
        B[:, mid] += A[:, mid] * B[:, prev]
        A[:, mid] *= A[:, prev]
        step //= 2
    return B[:, :t]
