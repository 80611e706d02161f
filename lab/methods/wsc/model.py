"""Weight Space Consolidation: the two operations on a network's weights, and the ``on_step`` hook that applies them
during one task's training.

1. **Rank-based reset** (:func:`importance_scores`, :func:`keep_mask`, :func:`blend_reset`). Adam keeps, for every
   weight, ``m`` (an EMA of the gradient, ``exp_avg``) and ``v`` (an EMA of its square, ``exp_avg_sq``). Their
   product ``s = |m| · v`` is large for weights the current task pushes consistently and hard. Per tensor, the top
   ``keep`` share by ``s`` is left alone; every other weight moves part of the way back to where it stood after the
   previous task: ``θ ← where(mask, θ, (1 - α) θ + α θ_prev)``.

   ``torch.where`` builds the new tensor; ``θ[~mask].mul_(...)`` would scale a *copy* (boolean-mask indexing copies)
   and leave ``θ`` untouched, a silent no-op the tests guard against.

2. **Weight averaging** (:class:`WeightAverage`). From the reset on, a running mean of the weights is kept every
   ``every`` steps (SWA); at the end of the task the network takes the mean: ``θ ← (1/n) Σ_k θ_k``. Our networks have
   no batch norm, so no statistics need recalibrating afterwards.

:class:`Consolidation` is the ``on_step(step, model, optimizer)`` hook of :func:`lab.core.train.fit`: it performs
the reset (if on) at ``reset_step`` and averages (if on) from there to the last step, where it loads the mean into
the network. :data:`VARIANTS` names the four combinations the paper compares.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from lab.checks import bad_value, check_int, check_real

__all__ = ["VARIANTS", "Consolidation", "WeightAverage", "blend_reset", "importance_scores", "keep_mask",
           "snapshot"]

#: the training variants: (rank-based reset, weight averaging); ``replay_b`` is plain replay from another batch
#: order (the control that shows what the order of the mini-batches alone changes)
VARIANTS: dict[str, tuple[bool, bool]] = {
    "replay": (False, False),
    "reset": (True, False),
    "swa": (False, True),
    "wsc": (True, True),
    "replay_b": (False, False),
}


def snapshot(model: nn.Module) -> list[torch.Tensor]:
    """Detached copies of ``model``'s trainable parameters, in ``model.parameters()`` order."""
    return [p.detach().clone() for p in model.parameters() if p.requires_grad]


@torch.no_grad()
def importance_scores(params: Iterable[torch.Tensor], optimizer: torch.optim.Optimizer) -> list[torch.Tensor]:
    """WSC's importance of every weight, ``|m| · v``, from an Adam-family optimiser's moments.

    Arguments:
        params: the parameters to score (each of any shape).
        optimizer: an Adam or AdamW optimiser that has stepped on them (its ``exp_avg`` is ``m``, its ``exp_avg_sq``
            is ``v``).

    Returns:
        one score tensor per parameter, of the parameter's shape, non-negative. A parameter the optimiser has no
        state for (never got a gradient) scores zero everywhere. Adam's bias corrections divide a whole tensor by
        one number, so they do not change the ranking within a tensor and are left out.
    """
    out = []
    for p in params:
        state = optimizer.state.get(p, {})
        if "exp_avg" not in state:
            out.append(torch.zeros_like(p))
            continue
        out.append(state["exp_avg"].abs() * state["exp_avg_sq"])
    return out


def keep_mask(score: torch.Tensor, keep: float) -> torch.Tensor:
    """The weights a reset leaves alone: the ``max(1, floor(keep · n))`` highest scores of one tensor.

    Arguments:
        score: ``(...)`` importance of each of the tensor's ``n`` weights.
        keep: the share kept, in (0, 1] (the paper: 0.2).

    Returns:
        a boolean tensor of ``score``'s shape with exactly that many True entries (ties broken by ``topk``).
    """
    keep = check_real("keep", keep, 0.0, 1.0, lo_open=True)
    n = score.numel()
    k = max(1, int(keep * n))
    mask = torch.zeros(n, dtype=torch.bool, device=score.device)
    mask[torch.topk(score.reshape(-1), k).indices] = True
    return mask.view_as(score)


@torch.no_grad()
def blend_reset(params: Sequence[torch.Tensor], previous: Sequence[torch.Tensor], masks: Sequence[torch.Tensor],
                alpha: float = 0.5) -> float:
    """Move the weights outside ``masks`` a share ``alpha`` of the way back to ``previous``, in place:
    ``θ ← where(mask, θ, (1 - α) θ + α θ_prev)``.

    Arguments:
        params: the parameters (modified in place).
        previous: the weights after the previous task, same shapes (on any device).
        masks: the kept weights (:func:`keep_mask`), same shapes.
        alpha: in [0, 1]; 0 changes nothing, 1 restores the previous weights outright (the paper: 0.5).

    Returns:
        the L2 norm of the change (over all parameters), for the record.
    """
    alpha = check_real("alpha", alpha, 0.0, 1.0)
    if not len(params) == len(previous) == len(masks):
        raise ValueError(f"params, previous and masks differ in length: {len(params)}, {len(previous)}, "
                         f"{len(masks)}")
    moved = 0.0
    for p, old, mask in zip(params, previous, masks):
        if p.shape != old.shape or p.shape != mask.shape:
            raise bad_value("previous", tuple(old.shape), f"the parameter's shape {tuple(p.shape)}")
        old = old.to(device=p.device, dtype=p.dtype)
        new = torch.where(mask.to(p.device), p, (1.0 - alpha) * p + alpha * old)
        moved += float(((new - p) ** 2).sum())
        p.copy_(new)
    return moved ** 0.5


class WeightAverage:
    """A running mean of a list of parameters (stochastic weight averaging).

    ``update(params)`` adds one snapshot: ``avg ← avg + (θ - avg) / (n + 1)``; ``load_into(params)`` copies the mean
    into them. ``n``: snapshots averaged so far.
    """

    def __init__(self) -> None:
        self.avg: list[torch.Tensor] | None = None
        self.n = 0

    @torch.no_grad()
    def update(self, params: Sequence[torch.Tensor]) -> None:
        if self.avg is None:
            self.avg = [p.detach().clone() for p in params]
        else:
            for a, p in zip(self.avg, params):
                a.add_(p.detach() - a, alpha=1.0 / (self.n + 1))
        self.n += 1

    @torch.no_grad()
    def load_into(self, params: Sequence[torch.Tensor]) -> None:
        if self.avg is None:
            raise ValueError("no snapshot was averaged")
        for a, p in zip(self.avg, params):
            p.copy_(a)


@dataclass
class ResetRecord:
    """What one reset did: the step, the share of weights kept, the norm of the change, and the share of each
    tensor's score mass the kept weights hold."""

    step: int
    kept: float
    moved: float
    score_mass_kept: float


class Consolidation:
    """``on_step`` hook of :func:`lab.core.train.fit` for one task: rank-based reset, weight averaging, both or
    neither.

    Arguments:
        previous: the weights after the previous task (:func:`snapshot` taken before training this task).
        total: the task's optimiser steps.
        reset, average: which operations are on.
        reset_at: the share of the task's steps after which the reset happens and the averaging starts, in (0, 1).
        keep: the share of each tensor kept by the reset (0.2).
        alpha: how far the other weights go back toward ``previous`` (0.5).
        every: averaging period in steps (the step right after the reset and the last step always count).
        swa_lr: a constant learning rate for the averaging phase (SWA's; None: keep the trainer's schedule). Set
            on the optimiser's groups after each step, since :func:`lab.core.train.fit` steps its scheduler first.

    Attributes:
        reset_step: the step after which the reset happens (the averaging starts with the weights right after it).
        record: the :class:`ResetRecord` (None until a reset).
        average: the :class:`WeightAverage` (None when averaging is off).
    """

    def __init__(self, previous: Sequence[torch.Tensor], total: int, *, reset: bool, average: bool,
                 reset_at: float = 0.5, keep: float = 0.2, alpha: float = 0.5, every: int = 1,
                 swa_lr: float | None = None):
        self.previous = list(previous)
        self.total = check_int("total", total, 1)
        self.reset, self.keep, self.alpha = bool(reset), check_real("keep", keep, 0, 1, lo_open=True), alpha
        reset_at = check_real("reset_at", reset_at, 0.0, 1.0, lo_open=True, hi_open=True)
        self.every = check_int("every", every, 1)
        self.reset_step = min(self.total, max(1, int(round(reset_at * self.total))))
        self.average = WeightAverage() if average else None
        self.swa_lr = None if swa_lr is None else check_real("swa_lr", swa_lr, 0.0, 1.0, lo_open=True)
        self.record: ResetRecord | None = None

    def __call__(self, step: int, model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
        if step < self.reset_step:
            return
        params = [p for p in model.parameters() if p.requires_grad]
        if step == self.reset_step and self.reset:
            scores = importance_scores(params, optimizer)
            masks = [keep_mask(s, self.keep) for s in scores]
            moved = blend_reset(params, self.previous, masks, self.alpha)
            kept = sum(int(m.sum()) for m in masks) / sum(m.numel() for m in masks)
            mass = [float(s[m].sum() / s.sum()) for s, m in zip(scores, masks) if float(s.sum()) > 0]
            self.record = ResetRecord(step, kept, moved, sum(mass) / max(1, len(mass)))
        if self.average is None:
            return
        if (step - self.reset_step) % self.every == 0 or step == self.total:
            self.average.update(params)
        if step == self.total:
            self.average.load_into(params)
        elif self.swa_lr is not None:
            # fit steps its scheduler before calling this hook: the rate set here is the next step's
            for group in optimizer.param_groups:
                group["lr"] = self.swa_lr
