"""Training of the tool-use models: each (task, model kind, regime, seed) on the hard-coded agent's episodes with
operands of 1..train_max digits, fresh problems at every step (``steps`` with the tool, ``no_tool_steps`` without),
the loss on the agent's tokens only; weights cached by :func:`lab.cache.cached_model` under ``<data>/tool_ssm/``."""

from __future__ import annotations

import numpy as np

from lab.cache import Trained, cached_model
from lab.core.train import fit, seed_everything
from lab.methods.tool_ssm import env as E
from lab.methods.tool_ssm.config import Config
from lab.methods.tool_ssm.model import build_model, masked_loss

__all__ = ["FORMAT", "trained"]

#: bump when the tokens, the agents or the models change: old cached weights are then not reused
FORMAT = 2


def _key(cfg: Config, task: str, kind: str, regime: str, seed: int) -> dict:
    return {"format": FORMAT, "task": task, "kind": kind, "regime": regime, "seed": seed,
            "train_max": cfg.train_max, "d_model": cfg.d_model, "n_layers": cfg.n_layers, "d_state": cfg.d_state,
            "steps": cfg.steps if regime == "tool" else cfg.no_tool_steps, "batch_size": cfg.batch_size,
            "lr": cfg.transformer_lr if kind == "transformer" else cfg.lr if regime == "tool" else cfg.no_tool_lr}


def trained(cfg: Config, task: str, kind: str, regime: str, seed: int, *, progress: bool = False,
            callback=None, root=None) -> Trained:
    """The model ``kind`` trained on ``task`` in ``regime`` from ``seed`` (from the cache, or trained now).

    Returns:
        :class:`lab.cache.Trained`: ``model``, ``curves["loss"]`` (per step), ``meta`` (``train_s``, ``cpu_s``).
    """
    key = _key(cfg, task, kind, regime, seed)

    def build():
        seed_everything(seed)
        return build_model(kind, cfg.d_model, cfg.n_layers, cfg.d_state)

    def sample(step: int):
        return E.batch(task, regime, (1, cfg.train_max), cfg.batch_size, np.random.default_rng([seed, 11, step]))

    def train(model):
        res = fit(model, sample, steps=key["steps"], loss=masked_loss, lr=key["lr"], weight_decay=0.0, seed=seed,
                  progress=progress, desc=f"{kind} {regime} {task} (seed {seed})", callback=callback,
                  device=cfg.device)
        return {"curves": {"loss": res.loss}, "meta": {"train_s": res.wall_time_s, "cpu_s": res.cpu_time_s}}

    return cached_model("tool_ssm", f"{task}-{kind}-{regime}-s{seed}", key, build, train, root=root)
