"""What the ``expressiveness`` dashboard (and a notebook) computes besides ``run``: one word run through one model,
position by position, with its states, its decisions against the truth and its first mistake.

Hand-built constructions answer at once; trained models come from the weight cache (:mod:`.train`, trained on first
use). Results are memoised in the process (:func:`lab.cache.memo`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lab.cache import Trained, memo
from lab.checks import bad_value, check_choice, check_int
from lab.config import PROFILE_NAMES
from lab.datasets.languages import LANGUAGES, decode, encode, get, language_task, prefix_labels
from lab.methods.ssm_ltl import model as M
from lab.methods.ssm_ltl.config import Config
from lab.methods.ssm_ltl.train import TRAINED_LANGUAGES, language_options, predict, trained_model

__all__ = ["LANGUAGE_NAMES", "TRAINED_CLASSES", "Trajectory", "config", "models_for", "precisions_for", "trained",
           "trajectory"]


@dataclass(frozen=True)
class Trajectory:
    """One word through one model.

    Attributes:
        language, model, precision: what was run (``model``: a construction of
            :data:`lab.methods.ssm_ltl.model.CONSTRUCTIONS` or a trained class of ``CLASSES``).
        source: ``hand-built`` or ``trained``. word: the word (str). tokens: ``(length,)`` int64.
        states: ``(length, d)`` float64, the state after each position (complex channels as real and imaginary
            parts). state_names: ``(d,)`` names of the channels.
        accept: ``(length,)`` bool, the model's decision on each prefix. truth: ``(length,)`` bool, membership.
        first_failure: the first 1-based position where they differ, or None.
    """

    language: str
    model: str
    precision: str
    source: str
    word: str
    tokens: np.ndarray
    states: np.ndarray
    state_names: tuple[str, ...]
    accept: np.ndarray
    truth: np.ndarray
    first_failure: int | None

    @property
    def accuracy(self) -> float:
        """Share of prefixes decided right."""
        return float((self.accept == self.truth).mean())


@memo(4)
def config(profile: str = "quick") -> Config:
    """The profile's Config (the trained models' sizes and the mod_count modulus)."""
    check_choice("profile", profile, PROFILE_NAMES)
    return Config.from_profile(profile)


def models_for(language: str) -> tuple[str, ...]:
    """The models that can run on ``language``: its hand-built constructions, then the trained classes (for the
    languages models are trained on)."""
    get(language)
    built = tuple(name for name, c in M.CONSTRUCTIONS.items() if c.language == language)
    return built + (M.CLASSES if language in TRAINED_LANGUAGES else ())


def precisions_for(model: str, modulus: int = 2) -> tuple[str, ...]:
    """The precisions ``model`` runs in (trained models: float32; int8 rotations only for m = 2)."""
    if model in M.CLASSES:
        return ("float32",)
    con = M.CONSTRUCTIONS[model]
    if con.language == "mod_count" and modulus != 2:
        return ("float32",)
    return con.precisions


@memo(32)
def trained(language: str, kind: str, seed: int = 0, profile: str = "quick") -> Trained:
    """The ``kind`` model trained on ``language`` from ``seed`` with the profile's settings (cached weights)."""
    return trained_model(config(profile), language, kind, seed)


@memo(256)
def trajectory(language: str, model: str, length: int = 64, precision: str = "float32", seed: int = 0,
               profile: str = "quick", word: str | None = None) -> Trajectory:
    """Run one word through ``model``, position by position.

    Arguments:
        language: a key of :data:`lab.datasets.languages.LANGUAGES`. model: one of :func:`models_for`.
        length: letters of the sampled word, in ``[1, the language's max_length]`` (ignored when ``word`` is given).
        precision: ``float32`` or ``int8`` (:func:`precisions_for`). seed: the sampled word's seed, and the trained
            model's seed. profile: the Config profile (trained models and the mod_count modulus).
        word: run this word instead of a sampled one.
    Returns:
        :class:`Trajectory`.
    """
    lang = get(language)
    cfg = config(profile)
    check_choice("model", model, models_for(language))
    check_choice("precision", precision, precisions_for(model, cfg.modulus))
    options = language_options(cfg, language)
    if word is None:
        length = check_int("length", length, 1, lang.max_length)
        tokens = language_task(language, n=1, length=length, seed=seed, **options).inputs[0]
    else:
        if not 1 <= len(word) <= lang.max_length:
            raise bad_value("word", word[:20] + ("..." if len(word) > 20 else ""),
                            f"a word of 1 to {lang.max_length} letters")
        tokens = encode(language, word)
    truth = prefix_labels(language, tokens[None], **options)[0]
    if model in M.CLASSES:
        accept, states = predict(trained(language, model, seed, profile).model, tokens[None])
        names = tuple(f"h{k}" for k in range(states.shape[-1]))
        if model == "lti":
            half = states.shape[-1] // 2
            names = tuple(f"Re h{k}" for k in range(half)) + tuple(f"Im h{k}" for k in range(half))
        source, accept, states = "trained", accept[0], states[0]
    else:
        params = {"modulus": cfg.modulus} if M.CONSTRUCTIONS[model].language == "mod_count" else {}
        if model == "lti_since":
            params = {"decay": cfg.lti_decay}
        elif model == "decay_parity":
            params = {"gate": cfg.decay_gate}
        run = M.CONSTRUCTIONS[model](tokens[None], precision, **params)
        source, accept, states, names = "hand-built", run.accept[0], run.states[0], run.names
    wrong = np.flatnonzero(accept != truth)
    return Trajectory(language, model, precision, source, decode(language, tokens), tokens, states, names,
                      np.asarray(accept, bool), np.asarray(truth, bool), int(wrong[0]) + 1 if wrong.size else None)


#: the languages a dashboard can choose from
LANGUAGE_NAMES = tuple(LANGUAGES)
#: the trained gating classes (the models of :func:`models_for` that train on first use)
TRAINED_CLASSES = M.CLASSES
