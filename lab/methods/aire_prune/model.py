r"""AIRE-Prune's scores, the baselines' scores, global and per-layer selection, and state removal.

Every score reads a trained layer's actual discretised system ``(λ, B̄, C)`` (:meth:`DiagonalSSM.system`): for
LRU ``B̄ = diag(γ) B``; for S5 the zero-order hold ``λ̄ = exp(ΛΔ)``, ``B̄ = (λ̄ - 1)/Λ B̃`` and ``C = 2 C̃``.

* ``aire``: asymptotic impulse-response energy ``E_i = Σ_k ||C_i λ_i^k B̄_i||² = ||C_i||² ||B̄_i||² / (1 - |λ_i|²)``,
  normalised per layer and selected globally;
* ``last``: LAST's H∞ score ``||C_i||² ||B̄_i||² / (1 - |λ_i|)²`` (the squared peak gain of state i), same
  normalisation and selection;
* ``magnitude``: ``|λ_i|`` (keep the slowest states), global;
* ``random``: random scores, global;
* ``aire_uniform``: AIRE's energy, but every layer keeps the same share of its states.

Multiply-adds per time step of a (pruned) model: :func:`lab.core.models.macs_per_token`.

Layer normalisation (LAMP / LAST): sort a layer's scores ascending, ``Ê_(k) = E_(k) / Σ_{j >= k} E_(j)``. The
layer's largest state always gets ``Ê = 1``, the largest possible value, so no layer is ever emptied.

Each stored complex state stands for a conjugate pair of the real system (see :mod:`lab.core.ssm`), so removing it
removes ``λ_i``, the row ``B̄_i`` and the column ``C_i`` of the pair together.
"""

from __future__ import annotations

import copy

import numpy as np
from torch import nn

from lab.checks import check_real
from lab.core.models import macs_per_token
from lab.core.ssm import DiagonalSSM

__all__ = ["SCORES", "diagonal_layers", "impulse_energy", "kept_total", "last_score", "layer_normalise",
           "macs_per_token", "plan", "prune", "prune_by", "select_global", "select_uniform", "state_scores"]

SCORES = ("aire", "last", "magnitude", "random", "aire_uniform")
#: scores that go through the layer normalisation and a global top-K
NORMALISED = ("aire", "last")


def diagonal_layers(model: nn.Module) -> list[DiagonalSSM]:
    layers = [m for m in model.ssm_layers() if isinstance(m, DiagonalSSM)]
    if not layers:
        raise ValueError("the model has no diagonal (LRU/S5) SSM layers to prune")
    return layers


def impulse_energy(lam: np.ndarray, Bbar: np.ndarray, C: np.ndarray) -> np.ndarray:
    """AIRE's per-state energy ``||C_i||² ||B̄_i||² / (1 - |λ_i|²)``: ``lam (N,)``, ``Bbar (N, H)``, ``C (H, N)``."""
    return _gain(Bbar, C) / (1.0 - np.minimum(np.abs(lam), 1.0 - 1e-12) ** 2)


def last_score(lam: np.ndarray, Bbar: np.ndarray, C: np.ndarray) -> np.ndarray:
    """LAST's per-state score ``||C_i||² ||B̄_i||² / (1 - |λ_i|)²`` (the squared H∞ norm of the state)."""
    return _gain(Bbar, C) / (1.0 - np.minimum(np.abs(lam), 1.0 - 1e-12)) ** 2


def _gain(Bbar: np.ndarray, C: np.ndarray) -> np.ndarray:
    return np.sum(np.abs(C) ** 2, axis=0) * np.sum(np.abs(Bbar) ** 2, axis=1)


def layer_normalise(scores: np.ndarray) -> np.ndarray:
    """``Ê_(k) = E_(k) / Σ_{j >= k} E_(j)`` over the layer's scores sorted ascending (returned in original order)."""
    scores = np.asarray(scores, dtype=np.float64)
    order = np.argsort(scores, kind="stable")
    s = scores[order]
    tail = np.cumsum(s[::-1])[::-1]  # tail[k] = Σ_{j >= k} s_j
    out = np.empty_like(s)
    out[order] = np.divide(s, tail, out=np.ones_like(s), where=tail > 0)
    return out


def state_scores(model: nn.Module, score: str, rng: np.random.Generator | None = None) -> list[np.ndarray]:
    """One array of per-state scores per diagonal layer (larger = keep), before any normalisation."""
    if score not in SCORES:
        raise ValueError(f"score={score!r} is not allowed; allowed: {', '.join(SCORES)}")
    out = []
    for layer in diagonal_layers(model):
        lam, Bbar, C = layer.system()
        if score in ("aire", "aire_uniform"):
            out.append(impulse_energy(lam, Bbar, C))
        elif score == "last":
            out.append(last_score(lam, Bbar, C))
        elif score == "magnitude":
            out.append(np.abs(lam))
        else:
            if rng is None:
                raise ValueError("score='random' needs rng")
            out.append(rng.random(len(lam)))
    return out


def check_ratio(ratio: float) -> float:
    """A pruning ratio: a finite number in [0, 1) (every layer keeps at least one state, so 1 cannot be honoured).
    Raises ``ConfigError`` (a ValueError) naming the value and the allowed range."""
    return check_real("ratio", ratio, 0.0, 1.0, hi_open=True)


def kept_total(sizes: list[int], ratio: float) -> int:
    """States kept over all layers at ``ratio``: ``total - round(ratio * total)``, at least one per layer."""
    total = sum(sizes)
    return max(len(sizes), total - int(round(check_ratio(ratio) * total)))


def select_global(scores: list[np.ndarray], n_keep: int) -> list[np.ndarray]:
    """Keep the ``n_keep`` largest scores over all layers, but always each layer's largest.

    Returns the sorted kept indices of each layer.
    """
    sizes = [len(s) for s in scores]
    if not len(sizes) <= n_keep <= sum(sizes):
        raise ValueError(f"n_keep={n_keep} is not allowed; allowed range [{len(sizes)}, {sum(sizes)}] "
                         "(at least one state per layer)")
    keep = [np.zeros(n, dtype=bool) for n in sizes]
    for k, s in enumerate(scores):
        keep[k][int(np.argmax(s))] = True
    rest = [(float(s[i]), -k, -i) for k, s in enumerate(scores) for i in range(len(s)) if not keep[k][i]]
    rest.sort(reverse=True)  # ties: earlier layer, earlier state first
    for _, k, i in rest[: n_keep - len(sizes)]:
        keep[-k][-i] = True
    return [np.flatnonzero(m) for m in keep]


def select_uniform(scores: list[np.ndarray], ratio: float) -> list[np.ndarray]:
    """Per layer, keep the largest ``n - round(ratio * n)`` scores (at least one)."""
    check_ratio(ratio)
    out = []
    for s in scores:
        n_keep = max(1, len(s) - int(round(ratio * len(s))))
        out.append(np.sort(np.argsort(-s, kind="stable")[:n_keep]))
    return out


def plan(model: nn.Module, score: str, ratio: float, rng: np.random.Generator | None = None) -> list[np.ndarray]:
    """The states each diagonal layer keeps when ``model`` is pruned by ``score`` at ``ratio``."""
    check_ratio(ratio)
    raw = state_scores(model, score, rng)
    if score == "aire_uniform":
        return select_uniform(raw, ratio)
    ranked = [layer_normalise(s) for s in raw] if score in NORMALISED else raw
    return select_global(ranked, kept_total([len(s) for s in raw], ratio))


def prune(model: nn.Module, keep: list[np.ndarray]) -> nn.Module:
    """A copy of ``model`` whose diagonal layers keep only the states ``keep`` (one index array per layer)."""
    pruned = copy.deepcopy(model)
    layers = diagonal_layers(pruned)
    if len(keep) != len(layers):
        raise ValueError(f"keep has {len(keep)} entries for {len(layers)} layers")
    for layer, idx in zip(layers, keep):
        layer.select_states(idx)
    return pruned


def prune_by(model: nn.Module, score: str, ratio: float, rng: np.random.Generator | None = None) -> nn.Module:
    """:func:`plan` then :func:`prune`."""
    return prune(model, plan(model, score, ratio, rng))
