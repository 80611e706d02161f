r"""Many small LSTMs trained at once: K independent one-layer LSTM regressors (the paper's model, hidden 8) stacked
on a leading model axis, their recurrence run by a Numba kernel (forward and backward by hand).

A burn-in grid is K trainings of the same tiny network (K = seeds x burn-ins, plus the control's re-runs), each far
too small to keep a core busy: torch spends its time on per-step overhead and on element-wise kernels over a few
hundred numbers. Here one optimiser step trains all K: the loss is the sum of the K models' burn-in losses, so each
model's gradient is its own; AdamW is element-wise and :func:`lab.core.train.fit` runs without a global gradient
clip (a clip on the joint norm would tie the models together), so the K trainings are the K separate ones. Each
model draws its own mini-batches (:func:`window_sampler`: one generator per seed, as ``fit`` would draw them).

The whole regressor, with gates in torch's order (input, forget, cell, output) and the zero initial state:

    a_t = W_ih u_t + b + W_hh h_{t-1},  i, f, o = σ(a_i, a_f, a_o),  g = tanh(a_g),
    c_t = f c_{t-1} + i g,  h_t = o tanh(c_t).

:func:`lstm_forward` (input projection, recurrence and linear head ``y_t = W_out h_t + b_out``) stores the gate
activations and cells; :func:`lstm_backward` returns every weight's gradient. The batch is the innermost
axis (``(K, N, 4 h, B)``), so every inner loop runs over the batch in vector registers. ``tanh(x) = 2 σ(2x) - 1``
with the float32 :func:`kernels.numba_common.fast_sigmoid` (error ~1e-7; the tests compare with ``nn.LSTM``).
"""

from __future__ import annotations

import numpy as np
import torch
from numba import njit
from torch import nn

from kernels.numba_common import FAST_FLAGS, fast_sigmoid

__all__ = ["StackedLSTM", "lstm_backward", "lstm_forward", "window_sampler"]

_ONE, _TWO = np.float32(1.0), np.float32(2.0)


@njit(cache=True, error_model="numpy", fastmath=FAST_FLAGS)
def lstm_forward(x, wih, bias, whh, wout, bout, Y, H, C, A):  # pragma: no cover - compiled
    """K regressors from the zero state: ``x`` ``(K, N, n_in, B)`` -> fills the outputs ``Y`` ``(K, N, n_out, B)``,
    the states ``H``, cells ``C`` ``(K, N, h, B)`` and gate activations ``A`` ``(K, N, 4h, B)``.

    Weights: ``wih`` ``(K, 4h, n_in)``, ``bias`` ``(K, 4h)``, ``whh`` ``(K, 4h, h)``, ``wout`` ``(K, n_out, h)``,
    ``bout`` ``(K, n_out)``."""
    K, N, I, B = x.shape
    G, h, O = whh.shape[1], whh.shape[2], wout.shape[1]
    acc = np.empty((G, B), np.float32)
    hp = np.empty((h, B), np.float32)
    cp = np.empty((h, B), np.float32)
    for k in range(K):
        hp[:] = 0
        cp[:] = 0
        for t in range(N):
            for g in range(G):
                bg = bias[k, g]
                for b in range(B):
                    acc[g, b] = bg
                for i in range(I):
                    w = wih[k, g, i]
                    for b in range(B):
                        acc[g, b] += w * x[k, t, i, b]
                for j in range(h):
                    w = whh[k, g, j]
                    for b in range(B):
                        acc[g, b] += w * hp[j, b]
            for u in range(h):
                for b in range(B):
                    i_ = fast_sigmoid(acc[u, b])
                    f = fast_sigmoid(acc[h + u, b])
                    gg = _TWO * fast_sigmoid(_TWO * acc[2 * h + u, b]) - _ONE
                    o = fast_sigmoid(acc[3 * h + u, b])
                    c = f * cp[u, b] + i_ * gg
                    hn = o * (_TWO * fast_sigmoid(_TWO * c) - _ONE)
                    A[k, t, u, b] = i_
                    A[k, t, h + u, b] = f
                    A[k, t, 2 * h + u, b] = gg
                    A[k, t, 3 * h + u, b] = o
                    C[k, t, u, b] = c
                    H[k, t, u, b] = hn
                    cp[u, b] = c
                    hp[u, b] = hn
            for o_ in range(O):
                bo = bout[k, o_]
                for b in range(B):
                    Y[k, t, o_, b] = bo
                for u in range(h):
                    w = wout[k, o_, u]
                    for b in range(B):
                        Y[k, t, o_, b] += w * hp[u, b]


@njit(cache=True, error_model="numpy", fastmath=FAST_FLAGS)
def lstm_backward(dY, x, wih, whh, wout, H, C, A, dwih, dbias, dwhh, dwout, dbout):  # pragma: no cover - compiled
    """Gradients of :func:`lstm_forward`: ``dY`` ``(K, N, n_out, B)`` (of the loss w.r.t. each output) -> fills the
    weights' gradients ``dwih``, ``dbias``, ``dwhh``, ``dwout``, ``dbout`` (overwritten)."""
    K, N, I, B = x.shape
    G, h, O = whh.shape[1], whh.shape[2], wout.shape[1]
    da = np.empty((G, B), np.float32)
    dh_next = np.empty((h, B), np.float32)
    dc_next = np.empty((h, B), np.float32)
    zero = np.zeros((h, B), np.float32)
    dwih[:] = 0
    dbias[:] = 0
    dwhh[:] = 0
    dwout[:] = 0
    dbout[:] = 0
    for k in range(K):
        dh_next[:] = 0
        dc_next[:] = 0
        for t in range(N - 1, -1, -1):
            for o_ in range(O):  # the head: its gradients, and the output's share of dh (into dh_next)
                s = np.float32(0.0)
                for b in range(B):
                    s += dY[k, t, o_, b]
                dbout[k, o_] += s
                for u in range(h):
                    w = wout[k, o_, u]
                    s = np.float32(0.0)
                    for b in range(B):
                        s += dY[k, t, o_, b] * H[k, t, u, b]
                        dh_next[u, b] += w * dY[k, t, o_, b]
                    dwout[k, o_, u] += s
            cprev = C[k, t - 1] if t > 0 else zero
            for u in range(h):
                for b in range(B):
                    i_ = A[k, t, u, b]
                    f = A[k, t, h + u, b]
                    gg = A[k, t, 2 * h + u, b]
                    o = A[k, t, 3 * h + u, b]
                    tc = _TWO * fast_sigmoid(_TWO * C[k, t, u, b]) - _ONE
                    dh = dh_next[u, b]
                    dc = dc_next[u, b] + dh * o * (_ONE - tc * tc)
                    da[u, b] = dc * gg * i_ * (_ONE - i_)
                    da[h + u, b] = dc * cprev[u, b] * f * (_ONE - f)
                    da[2 * h + u, b] = dc * i_ * (_ONE - gg * gg)
                    da[3 * h + u, b] = dh * tc * o * (_ONE - o)
                    dc_next[u, b] = dc * f
            for g in range(G):
                s = np.float32(0.0)
                for b in range(B):
                    s += da[g, b]
                dbias[k, g] += s
                for i in range(I):
                    s = np.float32(0.0)
                    for b in range(B):
                        s += da[g, b] * x[k, t, i, b]
                    dwih[k, g, i] += s
                if t > 0:
                    for j in range(h):
                        s = np.float32(0.0)
                        for b in range(B):
                            s += da[g, b] * H[k, t - 1, j, b]
                        dwhh[k, g, j] += s
            for j in range(h):
                for b in range(B):
                    dh_next[j, b] = 0
                for g in range(G):
                    w = whh[k, g, j]
                    for b in range(B):
                        dh_next[j, b] += w * da[g, b]


def _np(t: torch.Tensor) -> np.ndarray:
    return np.ascontiguousarray(t.detach().numpy(), np.float32)


class _Stack(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, wih, bias, whh, wout, bout):
        x_, wih_, bias_, whh_, wout_, bout_ = map(_np, (x, wih, bias, whh, wout, bout))
        K, N, _, B = x_.shape
        G, h, O = whh_.shape[1], whh_.shape[2], wout_.shape[1]
        Y = np.empty((K, N, O, B), np.float32)
        H = np.empty((K, N, h, B), np.float32)
        C = np.empty_like(H)
        A = np.empty((K, N, G, B), np.float32)
        lstm_forward(x_, wih_, bias_, whh_, wout_, bout_, Y, H, C, A)
        ctx.saved = (x_, wih_, whh_, wout_, H, C, A)
        return torch.from_numpy(Y)

    @staticmethod
    def backward(ctx, dY):
        x_, wih_, whh_, wout_, H, C, A = ctx.saved
        grads = [np.empty((x_.shape[0],) + s, np.float32) for s in
                 (wih_.shape[1:], (wih_.shape[1],), whh_.shape[1:], wout_.shape[1:], (wout_.shape[1],))]
        lstm_backward(_np(dY), x_, wih_, whh_, wout_, H, C, A, *grads)
        return (None, *map(torch.from_numpy, grads))


class StackedLSTM(nn.Module):
    """K one-layer LSTM regressors with a linear head, trained and run together (module docstring).

    Built from K :class:`~lab.methods.tbptt.model.RecurrentRegressor` LSTMs (:meth:`from_models`: their weights,
    ``b_ih + b_hh`` as one bias) and taken apart again (:meth:`unstack`). ``forward(x)``: ``x`` ``(K, N, n_in, B)``
    -> ``(K, N, n_out, B)`` (the batch last, as the kernel holds it), every window from the zero state.
    """

    def __init__(self, K: int, n_in: int, n_out: int, hidden: int):
        super().__init__()
        G = 4 * hidden
        self.w_ih = nn.Parameter(torch.zeros(K, G, n_in))
        self.w_hh = nn.Parameter(torch.zeros(K, G, hidden))
        self.bias = nn.Parameter(torch.zeros(K, G))
        self.w_out = nn.Parameter(torch.zeros(K, n_out, hidden))
        self.b_out = nn.Parameter(torch.zeros(K, n_out))

    @classmethod
    def from_models(cls, models) -> StackedLSTM:
        """The stack of ``models`` (LSTM regressors of one size), a copy of their weights."""
        first = models[0]
        out = cls(len(models), first.core.input_size, first.head.out_features, first.core.hidden_size)
        with torch.no_grad():
            for k, m in enumerate(models):
                out.w_ih[k] = m.core.weight_ih_l0
                out.w_hh[k] = m.core.weight_hh_l0
                out.bias[k] = m.core.bias_ih_l0 + m.core.bias_hh_l0
                out.w_out[k] = m.head.weight
                out.b_out[k] = m.head.bias
        return out

    def unstack(self, k: int, model) -> None:
        """Copy model ``k``'s weights into ``model`` (a RecurrentRegressor LSTM of the same size)."""
        with torch.no_grad():
            model.core.weight_ih_l0.copy_(self.w_ih[k])
            model.core.weight_hh_l0.copy_(self.w_hh[k])
            model.core.bias_ih_l0.copy_(self.bias[k])
            model.core.bias_hh_l0.zero_()
            model.head.weight.copy_(self.w_out[k])
            model.head.bias.copy_(self.b_out[k])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _Stack.apply(x, self.w_ih, self.bias, self.w_hh, self.w_out, self.b_out)


def window_sampler(x: torch.Tensor, t: torch.Tensor, seeds, batch_size: int):
    """Mini-batches for K models: model ``k`` draws its own windows in an order seeded by ``seeds[k]`` (reshuffled
    every epoch, as :func:`lab.core.train.fit` draws them; models with one seed draw the same batches).

    Arguments:
        x, t: the windows ``(W, N, n_in)``, ``(W, N, n_out)``. seeds: one per model.
    Returns:
        ``sample(step) -> (x (K, N, n_in, B), t (K, N, n_out, B))``: the batch last, as :class:`StackedLSTM` takes it.
    """
    W = len(x)
    uniq = sorted(set(int(s) for s in seeds))
    gens = {s: torch.Generator().manual_seed(s) for s in uniq}
    order: dict[int, torch.Tensor] = {}
    pos = {s: W for s in uniq}
    rows = [uniq.index(int(s)) for s in seeds]

    def sample(step: int):
        picks = []
        for s in uniq:
            if pos[s] + batch_size > W:  # a new epoch (a last partial batch is dropped)
                order[s] = torch.randperm(W, generator=gens[s])
                pos[s] = 0
            picks.append(order[s][pos[s]: pos[s] + min(batch_size, W)])
            pos[s] += batch_size
        idx = torch.stack(picks)[rows]  # (K, B)
        return x[idx].permute(0, 2, 3, 1).contiguous(), t[idx].permute(0, 2, 3, 1).contiguous()

    return sample
