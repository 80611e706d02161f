"""REM's training: the original model on the corrupted set (cached), and every unlearning method of a cell.

One cell of the grid is a corruption and a discovery rate. Its methods start from the same original model (trained
on the whole corrupted set, cached under ``<data>/rem/``) except ``retrain``, which trains from scratch on the retain
set for as long as the original did. The unlearning methods get the same step budget: ``unlearn_epochs`` passes of
``batch_size`` retain examples (plus a forget batch per step where the method has a forget term). Every training is
:func:`lab.core.train.fit` on ``cfg.device``.
"""

from __future__ import annotations

import copy
import hashlib
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from lab.cache import cached_model
from lab.core.train import fit, seed_everything
from lab.datasets.sequences import load_sequence_task
from lab.methods.rem import model as M
from lab.methods.rem.config import Config
from lab.methods.rem.corruptions import Corrupted, corrupt, discover

__all__ = ["BASELINES", "FORMAT", "METHODS", "Cell", "Data", "accuracy", "corrupted", "load_data", "log_prob",
           "original", "rem", "unlearn_cell"]

#: the methods of a cell: the paper's baselines, REM, REM's schedule without expansion (the headline's control),
#: REM without redirection (the paper's ablation) and a second REM run with other masks (the gap mask draws make)
METHODS = ("original", "retrain", "finetune", "ga", "npo", "rem", "rem_noexpand", "rem_noredirect", "rem_b")
#: the methods REM is compared with
BASELINES = ("original", "retrain", "finetune", "ga", "npo")
#: bump when training changes (invalidates cached original models)
FORMAT = 1
#: bump when REM's training changes (invalidates cached REM models)
REM_FORMAT = 1
#: the Config fields REM's training reads besides the original model's
REM_FIELDS = ("extra_units", "mask_density", "unlearn_epochs", "unlearn_lr", "forget_weight", "npo_beta")


@dataclass(frozen=True)
class Data:
    """The clean task, flattened for an MLP: ``x_train (n, d)``, ``y_train (n,)``, ``x_test (m, d)``, ``y_test``."""

    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor


def load_data(cfg: Config) -> Data:
    """The config's data set (cached by :mod:`lab.datasets.sequences`), inputs flattened to vectors."""
    task = load_sequence_task(cfg.dataset).subset(cfg.n_train or None, cfg.n_test or None)
    return Data(task.x_train.flatten(1), task.y_train, task.x_test.flatten(1), task.y_test)


def corrupted(cfg: Config, data: Data, kind: str, seed: int) -> Corrupted:
    """The training set of seed ``seed`` with corruption ``kind``."""
    return corrupt(kind, data.x_train, data.y_train, fraction=cfg.corrupt_fraction, seed=seed,
                   n_pairs=cfg.flip_pairs, target=cfg.backdoor_target)


def _mlp(cfg: Config, data: Data) -> M.MaskedMLP:
    return M.MaskedMLP(data.x_train.shape[1], 10, cfg.hidden, cfg.n_hidden)


def _train_plain(cfg: Config, model: M.MaskedMLP, x, y, seed: int, desc: str) -> dict:
    res = fit(model, x, y, epochs=cfg.epochs, batch_size=cfg.batch_size, lr=cfg.lr, weight_decay=cfg.weight_decay,
              seed=seed, progress=False, desc=desc, device=cfg.device)
    return {"curves": {"loss": res.loss}, "meta": {"seconds": res.wall_time_s, "steps": res.steps}}


def _original_key(cfg: Config, bad: Corrupted, seed: int) -> dict:
    """Everything the original model's weights depend on: the corrupted set, the MLP and its training."""
    return {"format": FORMAT, "dataset": cfg.dataset, "n_train": cfg.n_train, "corruption": bad.kind,
            "fraction": cfg.corrupt_fraction, "flip_pairs": cfg.flip_pairs, "target": cfg.backdoor_target,
            "hidden": cfg.hidden, "n_hidden": cfg.n_hidden, "epochs": cfg.epochs, "batch_size": cfg.batch_size,
            "lr": cfg.lr, "weight_decay": cfg.weight_decay, "seed": seed}


def original(cfg: Config, data: Data, bad: Corrupted, seed: int) -> M.MaskedMLP:
    """The model trained on the whole corrupted set (cached on disk by its training settings and seed)."""
    key = _original_key(cfg, bad, seed)

    def build():
        seed_everything(seed)
        return _mlp(cfg, data)

    return cached_model("rem", f"original-{bad.kind}", key, build,
                        lambda m: _train_plain(cfg, m, bad.x, bad.y, seed, "original")).model


def _steps(cfg: Config, n: int) -> int:
    return cfg.unlearn_epochs * math.ceil(n / cfg.batch_size)


@torch.no_grad()
def log_prob(model: M.MaskedMLP, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return F.log_softmax(model(x), dim=-1).gather(1, y[:, None]).squeeze(1)


def _sampler(parts_r: tuple, parts_f: tuple, batch: int, seed: int):
    """``sample(step)``: a random retain batch and a random forget batch (at most ``batch`` each), concatenated."""
    gen = torch.Generator().manual_seed(seed)
    n_r, n_f = len(parts_r[0]), len(parts_f[0])

    def sample(step: int):
        i = torch.randint(n_r, (min(batch, n_r),), generator=gen)
        j = torch.randint(n_f, (min(batch, n_f),), generator=gen)
        return tuple(t[i] for t in parts_r) + tuple(t[j] for t in parts_f)

    return sample


@dataclass
class Cell:
    """The unlearned models of one cell (all without extra units) and REM's models before discarding."""

    models: dict[str, M.MaskedMLP]
    forget: torch.Tensor
    retain: torch.Tensor
    rem_full: dict[str, M.MaskedMLP]
    masks: dict[str, tuple[torch.Tensor, torch.Tensor]]


def rem(cfg: Config, start: M.MaskedMLP, bad: Corrupted, forget, retain, ref_f, seed: int, *, redirect: bool = True,
        stream: int = 0, expand: bool = True) -> tuple[M.MaskedMLP, torch.Tensor, torch.Tensor]:
    """REM from ``start``: add extra units, train with example-tied masks (the discovered corrupted examples sharing
    one), redirection and NPO through the base units (:func:`lab.methods.rem.model.rem_loss`).

    ``expand=False`` is the same schedule (the same steps, learning rate, loss and batches, drawn from the same
    stream) with no extra units: the masks open nothing and the redirection term has no units to train, so what
    remains is the retain cross-entropy plus NPO on the forget set, NPO's loss on REM's batches.

    Returns:
        the expanded model after training (discard its extra units for the unlearned model), the masks of every
        training example ``(n, n_hidden, extra)`` and the shared mask of the forget set ``(n_hidden, extra)``.
    """
    gen = torch.Generator().manual_seed(seed * 1000 + 7 + stream)
    extra = cfg.extra_units if expand else 0
    redirect = redirect and expand
    big = M.expand(start, extra, gen)
    masks = M.example_masks(len(bad.y), cfg.n_hidden, extra, cfg.mask_density, gen)
    shared = M.example_masks(1, cfg.n_hidden, extra, cfg.mask_density, gen)[0]
    masks[forget] = shared
    m_f = shared.expand(len(forget), -1, -1).contiguous()
    sample = _sampler((bad.x[retain], bad.y[retain], masks[retain]), (bad.x[forget], bad.y[forget], ref_f, m_f),
                      cfg.batch_size, seed + 31 + stream)

    def train(model):
        fit(model, sample, steps=_steps(cfg, len(bad.y)), loss=M.rem_loss(cfg.forget_weight, cfg.npo_beta, redirect),
            lr=cfg.unlearn_lr, seed=seed, progress=False, desc="rem", device=cfg.device)

    if not redirect or stream or not expand:
        train(big)  # the controls and the second draw: not kept (the dashboard looks at REM itself)
        return big.eval(), masks, shared
    # REM itself is kept, by its start (the original model's key), its forget set and its training: the run's
    # models serve the dashboard's look at one cell
    key = {**_original_key(cfg, bad, seed), "rem": REM_FORMAT, "forget": _digest(forget), "retain": _digest(retain),
           **{f: getattr(cfg, f) for f in REM_FIELDS}}
    cached_model("rem", f"rem-{bad.kind}", key, lambda: big, train)
    return big.eval(), masks, shared


def _digest(index: torch.Tensor) -> str:
    return hashlib.sha256(index.to(torch.int64).numpy().tobytes()).hexdigest()


def unlearn_cell(cfg: Config, data: Data, bad: Corrupted, rate: float, seed: int,
                 start: M.MaskedMLP | None = None) -> Cell:
    """Every method of :data:`METHODS` on the cell ``(bad.kind, rate)`` of seed ``seed``."""
    start = original(cfg, data, bad, seed) if start is None else start
    forget, retain = discover(bad, rate)
    x_r, y_r = bad.x[retain], bad.y[retain]
    x_f, y_f = bad.x[forget], bad.y[forget]
    ref_f = log_prob(start, x_f, y_f)
    models = {"original": start}

    seed_everything(seed + 1)
    scratch = _mlp(cfg, data)
    _train_plain(cfg, scratch, x_r, y_r, seed, "retrain")
    models["retrain"] = scratch

    tuned = copy.deepcopy(start)
    fit(tuned, x_r, y_r, steps=_steps(cfg, len(bad.y)), epochs=10 ** 6, batch_size=cfg.batch_size,
        lr=cfg.unlearn_lr, seed=seed, progress=False, desc="finetune", device=cfg.device)
    models["finetune"] = tuned

    for kind in ("ga", "npo"):
        net = copy.deepcopy(start)
        sample = _sampler((x_r, y_r), (x_f, y_f, ref_f), cfg.batch_size, seed + 11)
        fit(net, sample, steps=_steps(cfg, len(bad.y)),
            loss=M.retain_and_forget_loss(kind, cfg.forget_weight, cfg.npo_beta), lr=cfg.unlearn_lr, seed=seed,
            progress=False, desc=kind, device=cfg.device)
        models[kind] = net

    rem_full, masks = {}, {}
    for name, redirect, stream, expand in (("rem", True, 0, True), ("rem_noexpand", True, 0, False),
                                           ("rem_noredirect", False, 0, True), ("rem_b", True, 1, True)):
        big, m_all, shared = rem(cfg, start, bad, forget, retain, ref_f, seed, redirect=redirect, stream=stream,
                                 expand=expand)
        rem_full[name], masks[name] = big, (m_all, shared)
        models[name] = M.discard(big)
    for m in models.values():
        m.eval()
    return Cell(models, forget, retain, rem_full, masks)


@torch.no_grad()
def accuracy(model: M.MaskedMLP, x: torch.Tensor, y: torch.Tensor, mask: torch.Tensor | None = None) -> float:
    """Accuracy in percent (NaN on an empty set)."""
    if len(y) == 0:
        return float("nan")
    return float((model(x, mask).argmax(-1) == y).float().mean()) * 100
