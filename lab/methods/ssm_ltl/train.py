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
from lab.datasets.languages import LANGUAGES, language_task
from lab.datasets.tokens import TokenTask
from lab.methods.ssm_ltl import model as M
from lab.methods.ssm_ltl.config import Config

__all__ = ["TEST_SEED_OFFSET", "TRAINED_LANGUAGES", "WEIGHTS_VERSION", "accuracy", "language_options", "predict",
           "test_task", "trained_model", "training_key"]

#: the languages the one-layer models are trained on: what separates the classes
TRAINED_LANGUAGES = ("aa_star", "mod_count", "b_since_a")
#: bump when training changes for an unchanged config (invalidates cached weights)
WEIGHTS_VERSION = 1
#: test words are sampled from seed + this offset (never the training words)
TEST_SEED_OFFSET = 10_000


def language_options(cfg: Config, language: str) -> dict:
    """The language's options under this config (mod_count: the modulus)."""
    return {"modulus": cfg.modulus} if language == "mod_count" else {}


def training_key(cfg: Config, language: str, kind: str, seed: int) -> dict:
    """Everything that determines a model's trained weights (the cache key)."""
    return {"language": language, "kind": kind, "seed": seed, "options": language_options(cfg, language),
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
    task = language_task(language, n=cfg.n_train, length=cfg.train_length, seed=seed,
                         **language_options(cfg, language))
    x, y = task.tensors()
    on_step = None if callback is None else (lambda step, total, _loss: callback(step, total))

    def build():
        seed_everything(seed)
        return M.build(len(LANGUAGES[language].alphabet), kind, cfg.d_state, cfg.d_hidden)

    def train(model):
        res = fit(model, x, y, loss=_loss, steps=cfg.steps, epochs=None, batch_size=cfg.batch_size, lr=cfg.lr,
                  seed=seed, progress=progress, desc=f"{kind} on {language} (seed {seed})", callback=on_step,
                  device=cfg.device)
        return {"curves": {"loss": res.loss}, "meta": {"train_time_s": res.wall_time_s, "steps": res.steps}}

    with threads(cfg.threads):
        return cached_model("ssm_ltl", f"{language}-{kind}", training_key(cfg, language, kind, seed), build, train,
                            use_cache=cfg.use_cache)


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
