"""What theory says each architecture can do on each task of the arena, with the source of each statement.

The arena's models are :mod:`lab.core.zoo`'s; this module holds the other half of the comparison: for every
(architecture, task) pair, whether a model of that class with finite precision and a fixed number of layers can
solve the task *at every length* (``yes``), provably cannot (``no``), or whether theory leaves it to the training
and the size (``open``). The predictions are about length generalisation, which is what the arena's longer test
lengths measure; at the training length most models can fit most tasks by memorising position-specific rules.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FAMILY", "Prediction", "SOURCES", "prediction"]

#: each architecture's class, as the theorems name them
FAMILY = {
    "lru": "lti", "s5": "lti",
    "mamba": "diag01", "mamba2": "diag01", "gla": "diag01",
    "gla_neg": "diag11",
    "deltanet": "householder01", "deltanet_neg": "householder11",
    "gru": "gru", "lstm": "lstm",
    "transformer": "nope", "transformer_rope": "rope",
    "psm": "psm", "chaingpt": "chain",
}

SOURCES = {
    "grazzi": "Grazzi et al. 2025, 'Unlocking state-tracking in linear RNNs through negative eigenvalues' (ICLR): "
              "eigenvalues in [0, 1] cannot solve parity at every length (Thm 1); diagonal ones in [-1, 1] solve "
              "parity but not counting mod 3 (Thm 2); products of Householders with eigenvalues in [-1, 1] over "
              "enough layers recognise every regular language (Thm 4)",
    "merrill": "Merrill, Petty & Sabharwal 2024, 'The illusion of state in state-space models' (ICML): diagonal "
               "and time-invariant SSMs lie in TC0 and cannot track A5 (NC1-complete) unless TC0 = NC1",
    "ssm_ltl": "Alsmann, Noori & Lange 2026 (this lab's ssm_ltl): time-invariant layers count modulo m only of the "
               "length, not of an input symbol; gates in (0, 1) capture the star-free languages",
    "rnn": "a non-linear RNN is a finite-state machine at finite precision: every regular language (Siegelmann & "
           "Sontag 1995); Weiss, Goldberg & Yahav 2018: the LSTM counts (Dyck-1, a^n b^n c^n), the GRU does not",
    "hahn": "Hahn 2020, 'Theoretical limitations of self-attention': soft attention cannot keep parity's "
            "sensitivity as length grows; without positions a causal transformer generalises poorly on parity "
            "and the word problems (Kazemnejad et al. 2023; Merrill & Sabharwal 2023: TC0)",
    "zoology": "Arora et al. 2024 (zoology): recall accuracy of a recurrent model is bounded by its state size; "
               "attention recalls at any length from its growing key-value cache",
    "mamba": "Gu & Dao 2023, 'Mamba' (section 3.1, Fig. 2): a time-invariant layer cannot select the tokens to "
             "copy out of noise of varying spacing; an input-dependent gate can, at any length",
    "jelassi": "Jelassi et al. 2024, 'Repeat after me': a model with a fixed-size state cannot copy sequences longer "
               "than its state holds (about state bits / log2 vocabulary tokens); a transformer can in principle",
    "psm": "Yau et al. 2025, 'Sequential-parallel duality in prefix scannable models': O(log n) chunk states "
           "combined by a non-associative transformer aggregator; no theorem places it on either side of these tasks "
           "at every length (the paper measures state tracking and recall at 4x its training length)",
    "mad": "Poli et al. 2024 (MAD): memorisation is a property of the weights (a fixed table), not of the sequence "
           "mixer; theory ties no class's ability to the length",
}


@dataclass(frozen=True)
class Prediction:
    """What theory predicts for one (architecture, task) pair at every length: ``yes``, ``no`` or ``open``."""

    verdict: str
    source: str


_STATE = ("parity", "cyclic", "s3", "a5")
_MAD = ("selective_copying", "noisy_recall", "compression", "memorisation")
_RECURRENT = ("lti", "diag01", "diag11", "householder01", "householder11", "gru", "lstm")


def _mad(family: str, task: str) -> Prediction:
    """MAD's skills: compression needs a state that grows with the length; selective copying an input-dependent
    gate; noisy recall a fixed number of bindings (open for every class, as MQAR); memorisation only weights."""
    if task == "compression":
        return Prediction("no" if family in _RECURRENT else "open", "jelassi")
    if task == "selective_copying":
        return Prediction("no" if family == "lti" else "open", "mamba")
    if task == "noisy_recall":
        return Prediction("yes" if family in ("nope", "rope") else "open", "zoology")
    return Prediction("open", "mad")


def _lti(task: str) -> Prediction:
    if task in _STATE:
        return Prediction("no", "ssm_ltl")
    return Prediction("no" if task in ("dyck1", "anbncn") else "open",
                      "ssm_ltl" if task != "mqar" else "zoology")


def _diag01(task: str) -> Prediction:
    if task in _STATE:
        return Prediction("no", "grazzi" if task == "parity" else "merrill")
    return Prediction("open" if task == "mqar" else "no", "zoology" if task == "mqar" else "ssm_ltl")


def _diag11(task: str) -> Prediction:
    if task == "parity":
        return Prediction("yes", "grazzi")
    if task in _STATE:
        return Prediction("no", "grazzi" if task == "cyclic" else "merrill")
    return _diag01(task)


def _householder(task: str, negative: bool) -> Prediction:
    if task in _STATE:
        return Prediction("open" if negative else "no", "grazzi")
    return Prediction("open", "zoology" if task == "mqar" else "grazzi")


def _rnn(task: str, lstm: bool) -> Prediction:
    if task in _STATE:
        return Prediction("yes", "rnn")
    if task == "mqar":
        return Prediction("open", "zoology")
    return Prediction("yes" if lstm else "no", "rnn")


def _attention(task: str) -> Prediction:
    if task == "mqar":
        return Prediction("yes", "zoology")
    return Prediction("no" if task in _STATE else "open", "hahn")


def prediction(model: str, task: str) -> Prediction:
    """Theory's prediction for ``model`` (a :data:`FAMILY` key) on ``task`` at every length."""
    family = FAMILY[model]
    if task in _MAD:
        return _mad(family, task)
    if family == "lti":
        return _lti(task)
    if family == "diag01":
        return _diag01(task)
    if family == "diag11":
        return _diag11(task)
    if family.startswith("householder") or family == "chain":  # ChainGPT: the delta rule with beta in (0, 2)
        return _householder(task, family != "householder01")
    if family == "psm":
        return Prediction("open", "psm")
    if family in ("gru", "lstm"):
        return _rnn(task, family == "lstm")
    return _attention(task)
