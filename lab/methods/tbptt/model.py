r"""Truncated BPTT with a burn-in phase: the subsequences, the burn-in loss, the recurrent regressors, the bound.

Training data is one long input-output record ``(u_t, y_t)``. Truncated BPTT cuts it into overlapping
subsequences of length ``N`` (every ``stride`` samples) and runs the network on each from the zero state ``h_0 = 0``.
The network's first outputs are poor: its state has not yet forgotten the wrong initial condition. The burn-in loss
ignores the first ``m`` of them,

    L_m = 1/(N - m) Σ_{j = m+1}^{N} || ŷ_j - y_j ||²,

so the first ``m`` steps only warm the state up. The paper bounds the training regret of this loss by
``C λ^m / (N - m)``: ``λ^m`` is what is left of the initial-state error after ``m`` contracting steps (``λ < 1``
the network's contraction rate), ``1 / (N - m)`` how few outputs are left to learn from. Their product is smallest
at an interior ``m*`` when the state forgets slowly and ``N`` is short.

After training, the network is evaluated as a simulator: run once over a whole record from ``h_0 = 0`` (the
training, validation or test record), its mean squared error on the standardised outputs.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from lab.core.models import SSMStack

__all__ = ["KINDS", "BoundFit", "RecurrentRegressor", "bound_m_star", "build_model", "burn_in_loss", "fit_bound",
           "flat_fit", "forgetting_rate", "loo_r2", "simulate", "subsequences"]

#: the recurrent models: the paper's LSTM, a GRU, and an LRU block of lab.core
KINDS = ("lstm", "gru", "lru")


def subsequences(u: np.ndarray, y: np.ndarray, N: int, stride: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Overlapping windows of a record.

    Arguments:
        u: ``(T, n_in)`` inputs. y: ``(T, n_out)`` outputs. N: window length (``N <= T``). stride: step between
            window starts.
    Returns:
        ``x`` ``(W, N, n_in)``, ``t`` ``(W, N, n_out)`` float32, windows starting at ``0, stride, ...`` with
        ``W = (T - N) // stride + 1``.
    """
    T = len(u)
    if not 1 <= N <= T:
        raise ValueError(f"N={N} is not allowed; allowed: an integer in [1, {T}] (the record's length)")
    starts = np.arange(0, T - N + 1, stride)
    idx = starts[:, None] + np.arange(N)[None, :]  # (W, N)
    return torch.as_tensor(u[idx], dtype=torch.float32), torch.as_tensor(y[idx], dtype=torch.float32)


def burn_in_loss(pred: torch.Tensor, target: torch.Tensor, m: int) -> torch.Tensor:
    """``1/(N - m) Σ_{j>m} ||ŷ_j - y_j||²``, averaged over the batch (and over output channels).

    Arguments:
        pred, target: ``(batch, N, n_out)``. m: burn-in steps, ``0 <= m < N``.
    """
    N = pred.shape[1]
    if not 0 <= m < N:
        raise ValueError(f"m={m} is not allowed; allowed: an integer in [0, {N - 1}] (below N={N})")
    return ((pred[:, m:] - target[:, m:]) ** 2).mean()


class RecurrentRegressor(nn.Module):
    """A recurrent network read out linearly at every step, started from the zero state.

    ``lstm``/``gru``: one ``torch.nn`` layer of ``hidden`` units and a linear head (the paper's LSTM has 8).
    ``lru``: a linear encoder to ``hidden`` features, one residual LRU block of :mod:`lab.core` (``hidden`` complex
    states, GELU and GLU after it) and a linear head.

    Arguments:
        kind: ``lstm``, ``gru`` or ``lru``. n_in, n_out: input and output channels. hidden: units or features.

    ``forward(x)``: ``x`` ``(batch, N, n_in)`` -> ``(batch, N, n_out)``.
    """

    def __init__(self, kind: str, n_in: int, n_out: int, hidden: int = 8):
        super().__init__()
        if kind not in KINDS:
            raise ValueError(f"kind={kind!r} is not allowed; allowed: {', '.join(KINDS)}")
        self.kind = kind
        if kind == "lru":
            self.encoder = nn.Linear(n_in, hidden)
            self.core = SSMStack("lru", hidden, 1, hidden, mixer_kwargs={"r_min": 0.5, "max_phase": math.pi / 4})
        else:
            self.core = (nn.LSTM if kind == "lstm" else nn.GRU)(n_in, hidden, batch_first=True)
        self.head = nn.Linear(hidden, n_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.kind == "lru":
            h = self.core(self.encoder(x))  # (b, N, hidden)
        else:
            h, _ = self.core(x)  # zero initial state, (b, N, hidden)
        return self.head(h)


def build_model(kind: str, n_in: int, n_out: int, hidden: int, seed: int) -> RecurrentRegressor:
    """A freshly initialised model, its weights drawn from ``seed`` alone."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return RecurrentRegressor(kind, n_in, n_out, hidden)


@torch.no_grad()
def simulate(model: nn.Module, u: np.ndarray) -> np.ndarray:
    """Run the model once over a whole record from the zero state: ``u`` ``(T, n_in)`` -> ``(T, n_out)``."""
    model.eval()
    return model(torch.as_tensor(u, dtype=torch.float32)[None])[0].numpy().astype(float)


@torch.no_grad()
def forgetting_rate(model: nn.Module, u: np.ndarray, length: int = 300, every: int = 20) -> float:
    """The rate ``λ`` at which the trained model forgets a wrong initial state, per sample (the bound's ``λ``).

    Windows of ``u`` (``length`` samples, one every ``every``) are run from the zero state and compared with the
    same samples of one run over the whole record (the state the record itself built up): the RMS difference of the
    outputs ``r_j`` at position ``j`` decays as ``λ^j``. ``λ = exp(slope)`` of a least-squares line through
    ``log r_j``, from the largest ``r_j`` on, until it falls below ``1e-4`` of it (float32's floor is near).
    1 when it does not decay.
    """
    model.eval()
    T = len(u)
    length = min(length, T // 2)
    full = simulate(model, u)  # (T, n_out)
    starts = np.arange(1, T - length + 1, every)
    x = torch.as_tensor(u[starts[:, None] + np.arange(length)[None]], dtype=torch.float32)  # (W, L, n_in)
    cold = model(x).numpy()  # (W, L, n_out)
    r = np.sqrt(np.mean((cold - full[starts[:, None] + np.arange(length)[None]]) ** 2, axis=(0, 2)))  # (L,)
    top = int(np.argmax(r))
    below = np.nonzero(r[top:] < 1e-4 * r[top])[0]
    stop = top + (int(below[0]) if len(below) else len(r) - top)
    if stop - top < 3 or r[top] == 0:
        return 1.0
    j = np.arange(top, stop)
    slope = np.polyfit(j, np.log(np.maximum(r[top:stop], 1e-30)), 1)[0]
    return float(min(1.0, math.exp(slope)))


def bound_m_star(lam: float, N: int) -> float:
    """The minimiser of the bound ``λ^m / (N - m)`` over real ``m`` in ``[0, N)``: ``N + 1/ln λ``, or 0 when that is
    negative (memory longer than the window) or ``λ >= 1`` (no contraction: every skipped output is lost)."""
    if not 0.0 < lam < 1.0:
        return 0.0
    return max(0.0, N + 1.0 / math.log(lam))


# --------------------------------------------------------------------------------------------------------------------
# The bound's shape, fitted to a measured burn-in curve
# --------------------------------------------------------------------------------------------------------------------
class BoundFit:
    """``f(m) = a + C λ^m / (N - m)`` fitted to ``(m, value)`` by least squares (``C >= 0``, ``0 < λ <= 1``).

    For each ``λ`` on a fine grid the model is linear in ``(a, C)``; the ``λ`` of least squared error wins.
    Attributes: ``a``, ``C``, ``lam``, ``sse`` (sum of squared residuals), ``N``.
    """

    LAMBDAS = 1.0 - np.geomspace(1e-4, 0.9, 200)  # 0.1 ... 0.9999

    def __init__(self, m: np.ndarray, value: np.ndarray, N: int):
        m, value = np.asarray(m, float), np.asarray(value, float)
        if np.any(m >= N):
            raise ValueError(f"every m must be below N={N}; got {m.max():g}")
        self.N = N
        best = (math.inf, 0.0, float(value.mean()), 1.0)
        for lam in self.LAMBDAS:
            g = lam**m / (N - m)  # (k,)
            gc = g - g.mean()
            denom = float(gc @ gc)
            C = max(0.0, float(gc @ (value - value.mean())) / denom) if denom > 0 else 0.0
            a = float(value.mean() - C * g.mean())
            sse = float(((a + C * g - value) ** 2).sum())
            if sse < best[0]:
                best = (sse, C, a, float(lam))
        self.sse, self.C, self.a, self.lam = best

    def __call__(self, m) -> np.ndarray:
        m = np.asarray(m, float)
        return self.a + self.C * self.lam**m / (self.N - m)

    @property
    def m_star(self) -> float:
        """The minimiser of ``λ^m / (N - m)`` over real ``m`` in ``[0, N)``: ``N + 1/ln λ`` (0 when negative)."""
        return 0.0 if self.C == 0.0 else bound_m_star(self.lam, self.N)


def fit_bound(m, value, N: int) -> BoundFit:
    """:class:`BoundFit` of a burn-in curve measured at ``m`` for window length ``N``."""
    return BoundFit(m, value, N)


def flat_fit(value) -> float:
    """The flat line's least-squares fit: the mean."""
    return float(np.mean(value))


def loo_r2(m, value, N: int) -> tuple[float, float, float]:
    """Leave-one-out comparison of the bound's shape with a flat line on one curve.

    Each point is predicted by both fits made without it; ``R²_loo = 1 - SSE_bound / SSE_flat`` of those
    predictions. A shape that only fits noise predicts left-out points worse than the mean does (``R²_loo <= 0``).

    Returns:
        ``(R²_loo, SSE_bound_loo, SSE_flat_loo)``.
    """
    m, value = np.asarray(m, float), np.asarray(value, float)
    sb = sf = 0.0
    for k in range(len(m)):
        keep = np.arange(len(m)) != k
        sb += float((BoundFit(m[keep], value[keep], N)(m[k]) - value[k]) ** 2)
        sf += float((flat_fit(value[keep]) - value[k]) ** 2)
    return (1.0 - sb / sf if sf > 0 else math.nan), sb, sf
