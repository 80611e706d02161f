r"""Truncated BPTT with a tuned burn-in: skip the first outputs of every subsequence in the loss.

Paper: Schiller, Heinrich, Lopez & Müller, "Tuning the burn-in phase in training recurrent neural networks improves
their performance" (arXiv 2602.10911, ICLR 2026).

**Idea.** Recurrent networks for system identification and forecasting are trained by truncated backpropagation
through time: the long record is cut into (overlapping) subsequences of length ``N`` and the network runs on each
from the zero state ``h_0 = 0``. The zero state is wrong for the system's actual state at the window's start, so the
first outputs of every window are errors the network cannot avoid, and fitting them distorts what it learns. A
burn-in phase lets the first ``m`` steps only warm the state up, and the loss counts the rest:

    L_m(θ) = 1/(N - m) Σ_{j = m+1}^{N} || ŷ_j(θ; h_0 = 0, u_1..u_j) - y_j ||².

**Theory.** For a contracting network (its state forgets an initial error as ``λ^k``, ``λ < 1``) the paper bounds
the training regret of the truncated problem against the full one by ``C λ^m / (N - m)``: a larger ``m`` shrinks
the initial-state error ``λ^m``, but leaves only ``N - m`` outputs to learn from. The bound is smallest at an
interior ``m* = N + 1/ln λ`` when the state forgets slowly (``λ`` near 1) and ``N`` is short; for long windows
``m`` barely matters. Their tables: Silver-Box ``N = 100``, ``m* = 94``, training MSE -83%, test -51%; RLC circuit
``N = 200``, ``m* = 110``, -68% / -79%; Wiener-Hammerstein no gain from ``N >= 500``.

**In this lab.** The default system is the paper's own RLC benchmark record (the official repository's CSV files,
MIT, shipped as ``benchmark/rlc.npz`` with their licence in ``benchmark/README.md``). The simulated systems of
:mod:`lab.datasets.systems` remain choices (the nonlinear RLC circuit with the paper's constants but a wider-band
input than the benchmark's, a Silverbox-like Duffing oscillator, a linear one-state system, statsmodels series for
forecasting); on the simulated RLC circuit a quick-sized training showed no gain at N = 200 (a one-seed probe,
2500 steps at lr 1.5e-2: -25% at m = 110, where the benchmark record gave +39%).
:mod:`.model` (subsequences, the burn-in loss, LSTM / GRU / LRU regressors, the forgetting rate ``λ`` of a trained
network and the bound's ``m*``, the bound's shape and its leave-one-out fit), :mod:`.fused` (a window length's whole
LSTM grid trained at once: a stacked LSTM with a Numba kernel), :mod:`.train` (cached grids on
:func:`lab.core.train.fit`), :mod:`.experiment` (``run``: one burn-in grid per N, fractions of N, for every seed
and model), :mod:`.claims`, :mod:`.plots`; notebook ``12_tbptt.ipynb``. The trained model is scored as the paper
scores it: run once over the whole training (validation, test) record from the zero state.
"""

from lab.registry import Method

METHOD = Method.here(__name__,
                     title=("Tuning the burn-in phase in training recurrent neural networks improves their "
                            "performance"),
                     paper="arXiv:2602.10911",
                     summary="Truncated BPTT whose loss skips the first m outputs of each window: an interior m* "
                             "from the bound λ^m / (N - m).")

__all__ = ["METHOD"]
