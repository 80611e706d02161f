"""The trained one-layer models: one per (language, gating class, seed), trained with :func:`lab.core.train.fit` on
per-position prefix membership and cached by :func:`lab.cache.cached_model` under ``data/ssm_ltl/``."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F

from lab.cache import Trained, cached_model
from lab.core.runtime import threads
from lab.core.train import fit, seed_everything
from lab.datasets.languages import LANGUAGES, language_task, prefix_labels
from lab.datasets.tokens import TokenTask
from lab.methods.ssm_ltl import model as M
from lab.methods.ssm_ltl.config import Config

__all__ = ["LOOKUP_MODELS", "TEST_SEED_OFFSET", "TRAINED_LANGUAGES", "WEIGHTS_VERSION", "accuracy",
           "language_options", "letter_tables", "long_run_words", "lookup_of", "predict", "test_task", "train_task",
           "trained_model", "training_key"]

#: the languages the one-layer models are trained on: what separates the classes
TRAINED_LANGUAGES = ("aa_star", "mod_count", "b_since_a")
#: bump when training changes for an unchanged config (invalidates cached weights)
WEIGHTS_VERSION = 1
#: test words are sampled from seed + this offset (never the training words)
TEST_SEED_OFFSET = 10_000
#: b S a trains on segments "a or c, then a run of b's" with runs log-uniform up to the whole training length (the
#: language's own sampler stops at a quarter of it): the runs the long-run test stretches
SINCE_SAMPLER = "runs to train_length"
#: (language, class) pairs whose readout gets the count lookup (``Config.control_lookup``): the trained controls of
#: the learnability claims on (aa)* and parity, which must fit their training length, where a (0, 1) gate can only
#: count and a ReLU MLP over the count fits its parity poorly; the other models keep the MLP alone
LOOKUP_MODELS = (("aa_star", "gate01"), ("mod_count", "gate01"))


def lookup_of(cfg: Config, language: str, kind: str) -> int:
    """The count lookup's largest count for this model (0: none; :class:`lab.methods.ssm_ltl.model.OneLayerSSM`)."""
    return cfg.control_lookup if (language, kind) in LOOKUP_MODELS else 0


def language_options(cfg: Config, language: str) -> dict:
    """The language's options under this config (mod_count: the modulus)."""
    return {"modulus": cfg.modulus} if language == "mod_count" else {}


def training_key(cfg: Config, language: str, kind: str, seed: int) -> dict:
    """Everything that determines a model's trained weights (the cache key)."""
    sampler = {"sampler": SINCE_SAMPLER} if language == "b_since_a" else {}
    lookup = lookup_of(cfg, language, kind)
    extra = {**sampler, **({"lookup": lookup} if lookup else {})}
    return {"language": language, "kind": kind, "seed": seed, "options": language_options(cfg, language), **extra,
            "train_length": cfg.train_length, "d_state": cfg.d_state, "d_hidden": cfg.d_hidden, "steps": cfg.steps,
            "batch_size": cfg.batch_size, "lr": cfg.lr, "n_train": cfg.n_train, "version": WEIGHTS_VERSION}


def _loss(model, batch) -> torch.Tensor:
    x, y = batch
    return F.cross_entropy(model(x).reshape(-1, 2), y.reshape(-1))


def trained_model(cfg: Config, language: str, kind: str, seed: int, *, progress: bool = False,
                  callback: Callable[[int, int], None] | None = None) -> Trained:
    """The ``kind`` model trained on ``language`` from seed ``seed``: from the weight cache, or trained now.

    Arguments:
        kind: a gating class of :data:`lab.methods.ssm_ltl.model.CLASSES`.
        callback: ``callback(step, total)`` after each training step (a dashboard's progress bar).
    Returns:
        :class:`lab.cache.Trained` (the model in eval mode; ``curves["loss"]``; ``meta["train_time_s"]``).
    """
    x, y = train_task(cfg, language, seed).tensors()
    on_step = None if callback is None else (lambda step, total, _loss: callback(step, total))

    def build():
        seed_everything(seed)
        return M.build(len(LANGUAGES[language].alphabet), kind, cfg.d_state, cfg.d_hidden,
                       lookup_of(cfg, language, kind))

    def train(model):
        res = fit(model, x, y, loss=_loss, steps=cfg.steps, epochs=None, batch_size=cfg.batch_size, lr=cfg.lr,
                  seed=seed, progress=progress, desc=f"{kind} on {language} (seed {seed})", callback=on_step,
                  device=cfg.device)
        return {"curves": {"loss": res.loss}, "meta": {"train_time_s": res.wall_time_s, "steps": res.steps}}

    with threads(cfg.threads):
        return cached_model("ssm_ltl", f"{language}-{kind}", training_key(cfg, language, kind, seed), build, train,
                            use_cache=cfg.use_cache)


def _since_words(rng: np.random.Generator, n: int, length: int) -> np.ndarray:
    """b S a words of segments "a or c, then a run of b's", runs log-uniform in [0, length) (words may open with
    b's)."""
    out = np.empty((n, length), dtype=np.int64)
    top = np.log(length)
    for r in range(n):
        t = int(np.expm1(rng.uniform(0, top)))
        out[r, :t] = 1
        while t < length:
            out[r, t] = 0 if rng.random() < 0.5 else 2
            run = int(np.expm1(rng.uniform(0, top)))
            out[r, t + 1:t + 1 + run] = 1
            t += 1 + run
    return out


def train_task(cfg: Config, language: str, seed: int) -> TokenTask:
    """The training words of ``language`` (b S a: :data:`SINCE_SAMPLER`; the others: the language's sampler)."""
    task = language_task(language, n=cfg.n_train, length=cfg.train_length, seed=seed,
                         **language_options(cfg, language))
    if language != "b_since_a":
        return task
    x = _since_words(np.random.default_rng(seed), cfg.n_train, cfg.train_length)
    return TokenTask(task.name, x, prefix_labels(language, x).astype(np.int64), task.vocab_size, task.n_classes,
                     {**task.options, "sampler": SINCE_SAMPLER})


def long_run_words(cfg: Config, seed: int, run: int) -> tuple[np.ndarray, np.ndarray]:
    """The long-run test of b S a: each of n_test test words of train_length letters, then an a (odd rows: a c),
    then ``run`` b's. Returns the words ``(n_test, train_length + 1 + run)`` and the truth at their last letter
    (an a before the run: a member)."""
    prefix = test_task(cfg, "b_since_a", cfg.train_length, seed).inputs
    first = np.where(np.arange(len(prefix)) % 2 == 0, 0, 2)
    words = np.concatenate([prefix, first[:, None], np.ones((len(prefix), run), dtype=np.int64)], axis=1)
    return words, first == 0


@torch.no_grad()
def letter_tables(model: M.OneLayerSSM) -> tuple[np.ndarray, np.ndarray]:
    """A trained model's gate and increment for each of its letters: two ``(vocab, d_state)`` complex128 arrays
    holding its float32 values (a time-invariant model has the same gate on every row)."""
    x = torch.arange(model.vocab)[None]
    gate = model.gates(x).expand(1, model.vocab, model.d_state)[0]
    inc = torch.complex(model.inc_re, model.inc_im) if model.kind == "lti" else model.inc
    return gate.numpy().astype(np.complex128), inc.detach().numpy().astype(np.complex128)


def test_task(cfg: Config, language: str, length: int, seed: int, n: int | None = None) -> TokenTask:
    """Test words of ``length`` letters (sampled from ``seed + TEST_SEED_OFFSET``)."""
    return language_task(language, n=cfg.n_test if n is None else n, length=length, seed=seed + TEST_SEED_OFFSET,
                         **language_options(cfg, language))


@torch.no_grad()
def predict(model: M.OneLayerSSM, tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A trained model's decisions ``(n, length)`` bool and its states ``(n, length, d)`` (complex split)."""
    x = torch.as_tensor(np.asarray(tokens), dtype=torch.long)
    h = model.states(x)
    accept = model(x).argmax(-1).numpy().astype(bool)
    return accept, model.features(h).numpy().astype(np.float64)


def accuracy(accept: np.ndarray, truth: np.ndarray, start: int = 0) -> float:
    """The share of prefixes from position ``start`` on whose decision is right."""
    return float((accept[:, start:] == truth[:, start:].astype(bool)).mean())
