r"""State space layers on the lab's scan kernels: LRU, S5, Mamba (selective) and Mamba-2 (SSD).

Every layer maps ``(batch, length, d_model) -> (batch, length, d_model)`` and has two forms that agree:

* ``forward(x, state=None, return_state=False)``: the parallel form; its recurrence runs in :mod:`kernels`
  (``linear_scan`` for LRU and S5, ``selective_scan`` for Mamba, ``ssd`` for Mamba-2), never a Python loop;
* ``step(x_t, state) -> (y_t, state)``: one step of the recurrence, ``x_t`` of shape ``(batch, d_model)``, for
  autoregressive decoding; ``initial_state(batch)`` gives the zero state.

**Linear time-invariant layers** (diagonal, complex): ``h_t = λ ⊙ h_{t-1} + B̄ x_t``, ``y_t = Re(C h_t) + D ⊙ x_t``.

* :class:`LRU` (Orvieto et al. 2023, "Resurrecting recurrent neural networks for long sequences"): exponential
  parametrisation ``λ = exp(-exp(ν_log) + i exp(θ_log))`` (so ``|λ| < 1`` always) and input normalisation
  ``B̄ = diag(γ) B`` with ``γ`` initialised to ``sqrt(1 - |λ|²)``.
* :class:`S5` (Smith et al. 2023, "Simplified state space layers for sequence modeling"): continuous-time
  ``Λ = -exp(Λ_re_log) + i Λ_im`` initialised from HiPPO-N, per-state step ``Δ``, zero-order hold
  ``λ̄ = exp(ΛΔ)``, ``B̄ = (λ̄ - 1)/Λ · B̃``; conjugate symmetry: the layer stores one state per conjugate pair and
  outputs ``2 Re(C̃ h)``.

In both, each stored complex state stands for a conjugate pair of the equivalent real system (LRU through ``Re``,
S5 through ``2 Re``), so removing a stored state removes the pair together. Both expose :meth:`system`, the
discretised ``(λ, B̄, C)`` in float64, and :meth:`select_states` / :meth:`set_system` to shrink the layer in place
(with its Adam moments), which the pruning and reduction methods build on.

**Selective layers.** :class:`Mamba` (Gu & Dao 2023) and :class:`Mamba2` (Dao & Gu 2024, SSD) blocks with their input
projection, causal depthwise convolution, gating and output projection.

Modules: :mod:`.diagonal` (the LTI base), :mod:`.lru`, :mod:`.s5`, :mod:`.conv` (pieces of the selective layers),
:mod:`.mamba`, :mod:`.mamba2`; this package re-exports every public name and builds a mixer by name.
"""

from __future__ import annotations

from torch import nn

from .diagonal import DiagonalSSM
from .lru import LRU
from .mamba import Mamba
from .mamba2 import Mamba2
from .s5 import S5, hippo_n_eigenvalues

__all__ = ["LRU", "S5", "Mamba", "Mamba2", "DiagonalSSM", "hippo_n_eigenvalues", "MIXERS", "make_mixer"]


MIXERS: dict[str, type[nn.Module]] = {"lru": LRU, "s5": S5, "mamba": Mamba, "mamba2": Mamba2}


def make_mixer(kind: str, d_model: int, d_state: int, **kwargs) -> nn.Module:
    """Build a sequence mixer by name (``lru``, ``s5``, ``mamba``, ``mamba2``)."""
    if kind not in MIXERS:
        raise ValueError(f"unknown SSM kind {kind!r}; allowed: {', '.join(MIXERS)}")
    return MIXERS[kind](d_model, d_state, **kwargs)
