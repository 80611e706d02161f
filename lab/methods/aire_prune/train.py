"""AIRE-Prune's trained models: an LRU or S5 classifier per (config, kind, seed), trained once and cached.

Pruning never retrains, so this is the method's only training: :func:`lab.core.tasks.fit_classifier` on the task's
training set, weights (with the loss curve and the training time) kept by :func:`lab.cache.cached_model` under
``data/aire_prune/``, keyed by :func:`training_key`.
"""

from __future__ import annotations

from collections.abc import Callable

from lab.cache import Trained, cached_model
from lab.core.runtime import threads
from lab.core.tasks import MIXER_KWARGS, build_classifier, fit_classifier, load_task
from lab.core.train import seed_everything
from lab.datasets.sequences import SequenceTask
from lab.methods.aire_prune.config import Config

__all__ = ["WEIGHTS_VERSION", "trained_model", "training_key"]

#: bump when training changes for an unchanged config (invalidates cached weights)
WEIGHTS_VERSION = 1


def training_key(cfg: Config, kind: str, seed: int) -> dict:
    """Everything that determines a model's trained weights (the cache key)."""
    key = cfg.training_key(kind=kind, seed=seed, mixer=MIXER_KWARGS[kind], version=WEIGHTS_VERSION)
    key["d_state"] = cfg.state_size(kind)
    return key


def trained_model(cfg: Config, kind: str, seed: int, task: SequenceTask | None = None, *, progress: bool = True,
                  callback: Callable[[int, int], None] | None = None) -> Trained:
    """A trained classifier: from the weight cache (``data/aire_prune/``) or trained now and cached.

    Arguments:
        kind: the SSM layer, ``lru`` or ``s5``. seed: initial weights and mini-batch order.
        callback: called as ``callback(step, total)`` after each training step (a dashboard's progress bar).
    Returns:
        :class:`lab.cache.Trained`: the model in eval mode, its loss curve, ``meta["train_time_s"]`` (wall seconds
        of the training when it was trained) and whether it came from the cache.
    """
    task = task or load_task(cfg)
    on_step = None if callback is None else (lambda step, total, _loss: callback(step, total))

    def train(model):
        res = fit_classifier(model, task, cfg, seed, progress=progress, desc=f"train {kind} (seed {seed})",
                             callback=on_step)
        return {"curves": {"loss": res.loss}, "meta": {"train_time_s": res.wall_time_s, "steps": res.steps}}

    size = {**cfg.model_size(), "d_state": cfg.state_size(kind)}
    with threads(cfg.threads):
        seed_everything(seed)
        return cached_model("aire_prune", f"{cfg.dataset}-{kind}", training_key(cfg, kind, seed),
                            lambda: build_classifier(task, kind, **size), train,
                            use_cache=cfg.use_cache)
