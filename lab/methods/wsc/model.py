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
the network. :data:`VARIANTS` names the four combinations the paper compares and the ablations on WSC's schedule.

3. **The official code's reset** (:func:`official_blend`). The official code blends with
   ``param.data[~mask].mul_(0.5).add_(old[~mask], alpha=0.5)``: the boolean index makes a copy, the blend lands in
   it, and the weights do not change. Its WSC is therefore averaging plus the learning rate's re-warm (SWALR back to
   the initial rate at a validation plateau); the ``wsc_official`` variant runs it that way.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from lab.checks import bad_value, check_int, check_real

__all__ = ["CLAIM_SHARE_ONLY", "RESETS", "VARIANTS", "Consolidation", "Variant", "WeightAverage", "blend_reset",
           "importance_scores", "keep_mask", "official_blend", "snapshot"]

@dataclass(frozen=True)
class Variant:
    """One training variant: which reset (None, ``"paper"``: the ``torch.where`` blend; ``"official"``: the official
    code's boolean-index blend, which writes into a copy and changes nothing), whether the weights are averaged from
    the reset on, and whether the learning rate is held at the averaging phase's constant rate from the reset on
    (the re-warm: SWA's rate, the peak rate, where the cosine schedule had decayed)."""

    reset: str | None
    average: bool
    rewarm: bool


#: the training variants. WSC's halves (``reset``: the reset on the trainer's cosine schedule; ``swa``: averaging with
#: the re-warm), WSC itself, and its ablations on WSC's own schedule: ``wsc_noavg`` (the reset and the re-warm, no
#: averaging: what the averaging adds), ``wsc_official`` (the official code's reset, a no-op, with the averaging and
#: the re-warm: the paper's WSC as its code runs), ``replay_rewarm`` (the re-warm alone: plain replay on WSC's
#: schedule, a baseline); ``replay_b`` is plain replay from another batch order (what the order alone changes)
VARIANTS: dict[str, Variant] = {
    "replay": Variant(None, False, False),
    "reset": Variant("paper", False, False),
    "swa": Variant(None, True, True),
    "wsc": Variant("paper", True, True),
    "replay_b": Variant(None, False, False),
    "wsc_noavg": Variant("paper", False, True),
    "wsc_official": Variant("official", True, True),
    "replay_rewarm": Variant(None, False, True),
}
#: the variants run at the claim share only (the ablations and the controls); the others at every memory share
CLAIM_SHARE_ONLY = ("replay_b", "wsc_noavg", "wsc_official", "replay_rewarm")
#: the resets :class:`Consolidation` knows
RESETS = ("paper", "official")


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



@torch.no_grad()
def official_blend(params: Sequence[torch.Tensor], previous: Sequence[torch.Tensor], masks: Sequence[torch.Tensor],
                   alpha: float = 0.5) -> float:
    """The blend as the official code writes it: ``θ[~mask].mul_(1 - α).add_(θ_prev[~mask], alpha=α)``.

    Boolean-mask indexing returns a copy, so the in-place operations change the copy and ``θ`` stays as it was: the
    official reset is a no-op. Kept to run the paper's WSC as its code runs it, and measured rather than assumed.

    Returns:
        the L2 norm of the change ``θ`` underwent (zero), computed from copies taken before and after.
    """
    alpha = check_real("alpha", alpha, 0.0, 1.0)
    if not len(params) == len(previous) == len(masks):
        raise ValueError(f"params, previous and masks differ in length: {len(params)}, {len(previous)}, "
                         f"{len(masks)}")
    moved = 0.0
    for p, old, mask in zip(params, previous, masks):
        if p.shape != old.shape or p.shape != mask.shape:
            raise bad_value("previous", tuple(old.shape), f"the parameter's shape {tuple(p.shape)}")
        before = p.detach().clone()
        old = old.to(device=p.device, dtype=p.dtype)
        keep = mask.to(p.device)
        p.data[~keep].mul_(1.0 - alpha).add_(old[~keep], alpha=alpha)
        moved += float(((p.detach() - before) ** 2).sum())
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
    """``on_step`` hook of :func:`lab.core.train.fit` for one task: rank-based reset, weight averaging, the re-warm,
    any combination.

    Arguments:
        previous: the weights after the previous task (:func:`snapshot` taken before training this task).
        total: the task's optimiser steps.
        reset: None, ``"paper"`` (:func:`blend_reset`) or ``"official"`` (:func:`official_blend`, a no-op); True
            means ``"paper"``, False None.
        average: whether the weights are averaged from the reset step on.
        reset_at: the share of the task's steps after which the reset happens and the averaging starts, in (0, 1).
        keep: the share of each tensor kept by the reset (0.2).
        alpha: how far the other weights go back toward ``previous`` (0.5).
        every: averaging period in steps (the step right after the reset and the last step always count).
        swa_lr: a constant learning rate from the reset step on (SWA's; the re-warm where the trainer's cosine has
            decayed; None: keep the trainer's schedule). Set on the optimiser's groups after each step, since
            :func:`lab.core.train.fit` steps its scheduler first.

    Attributes:
        reset_step: the step after which the reset happens (the averaging starts with the weights right after it).
        record: the :class:`ResetRecord` (None until a reset).
        average: the :class:`WeightAverage` (None when averaging is off).
    """

    def __init__(self, previous: Sequence[torch.Tensor], total: int, *, reset: bool | str | None, average: bool,
                 reset_at: float = 0.5, keep: float = 0.2, alpha: float = 0.5, every: int = 1,
                 swa_lr: float | None = None):
        self.previous = list(previous)
        self.total = check_int("total", total, 1)
        if reset is True:
            reset = "paper"
        elif reset is False:
            reset = None
        if reset is not None and reset not in RESETS:
            raise bad_value("reset", reset, "None, " + " or ".join(map(repr, RESETS)))
        self.reset, self.keep, self.alpha = reset, check_real("keep", keep, 0, 1, lo_open=True), alpha
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
        if step == self.reset_step and self.reset is not None:
            scores = importance_scores(params, optimizer)
            masks = [keep_mask(s, self.keep) for s in scores]
            blend = blend_reset if self.reset == "paper" else official_blend
            moved = blend(params, self.previous, masks, self.alpha)
            kept = sum(int(m.sum()) for m in masks) / sum(m.numel() for m in masks)
            mass = [float(s[m].sum() / s.sum()) for s, m in zip(scores, masks) if float(s.sum()) > 0]
            self.record = ResetRecord(step, kept, moved, sum(mass) / max(1, len(mass)))
        if self.average is not None:
            if (step - self.reset_step) % self.every == 0 or step == self.total:
                self.average.update(params)
            if step == self.total:
                self.average.load_into(params)
        if self.swa_lr is not None and step < self.total:
            # fit steps its scheduler before calling this hook: the rate set here is the next step's
            for group in optimizer.param_groups:
                group["lr"] = self.swa_lr
