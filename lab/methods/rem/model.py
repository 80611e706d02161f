"""REM's model and losses: an MLP whose hidden layers can grow extra units gated by example-tied masks, the
redirection and NPO losses, and the baselines' forget losses.

Shapes: ``x (batch, d_in)``, logits ``(batch, n_classes)``, masks ``(batch, n_hidden, extra)`` of 0/1 floats.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["MaskedMLP", "discard", "example_masks", "expand", "extra_share", "npo_loss", "rem_loss",
           "retain_and_forget_loss"]


class MaskedMLP(nn.Module):
    """``d_in -> [hidden + extra] x n_hidden -> n_classes`` with ReLU; the last ``extra`` units of every hidden
    layer are multiplied by a per-example mask.

    The base units are always on. The extra units feed the next layer like any other unit, so an example's
    prediction can lean on the extra units its mask opens; with ``mask=None`` they are all off, which is exactly
    the model after :func:`discard`. With ``extra=0`` this is a plain MLP (the original model).
    """

    def __init__(self, d_in: int, n_classes: int, hidden: int, n_hidden: int, extra: int = 0):
        super().__init__()
        self.d_in, self.n_classes, self.hidden, self.n_hidden, self.extra = d_in, n_classes, hidden, n_hidden, extra
        widths = [d_in] + [hidden + extra] * n_hidden
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(widths[:-1], widths[1:]))
        self.head = nn.Linear(widths[-1], n_classes)

    def features(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> list[torch.Tensor]:
        """The hidden activations after gating, one ``(batch, hidden + extra)`` tensor per layer.

        Arguments:
            x: ``(batch, d_in)``. mask: ``(batch, n_hidden, extra)`` in {0, 1}, or None (extra units off).
        """
        out = []
        for i, layer in enumerate(self.layers):
            h = F.relu(layer(x))  # (batch, hidden + extra)
            if self.extra:
                gate = torch.zeros(len(x), self.extra, device=x.device) if mask is None else mask[:, i]
                h = torch.cat([h[:, : self.hidden], h[:, self.hidden:] * gate], dim=1)
            out.append(h)
            x = h
        return out

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Logits ``(batch, n_classes)`` of ``x (batch, d_in)`` with the extra units gated by ``mask``."""
        return self.head(self.features(x, mask)[-1])


def expand(model: MaskedMLP, extra: int, generator: torch.Generator | None = None) -> MaskedMLP:
    """A copy of ``model`` (without extra units) with ``extra`` new units per hidden layer.

    The new units' incoming weights are drawn like a fresh layer's (uniform, ±1/sqrt(fan_in)); their outgoing
    weights start at zero, so the expanded model computes exactly the original function for every mask until it is
    trained.
    """
    if model.extra:
        raise ValueError(f"extra={model.extra} is not allowed for the model to expand; allowed: 0 (discard first)")
    big = MaskedMLP(model.d_in, model.n_classes, model.hidden, model.n_hidden, extra)
    H = model.hidden
    with torch.no_grad():
        for i, (old, new) in enumerate(zip(model.layers, big.layers)):
            bound = old.weight.shape[1] ** -0.5 if i == 0 else (H + extra) ** -0.5
            new.weight.uniform_(-bound, bound, generator=generator)
            new.bias.uniform_(-bound, bound, generator=generator)
            fan = old.weight.shape[1]
            new.weight[:H, :fan] = old.weight
            new.bias[:H] = old.bias
            if i > 0:
                new.weight[:, H:] = 0.0  # from the previous layer's extra units: silent at first
        big.head.weight.zero_()
        big.head.weight[:, :H] = model.head.weight
        big.head.bias.copy_(model.head.bias)
    return big


def discard(model: MaskedMLP) -> MaskedMLP:
    """The model without its extra units (the weights of the base units only): ``discard(m)(x) == m(x, None)``."""
    small = MaskedMLP(model.d_in, model.n_classes, model.hidden, model.n_hidden, 0)
    H = model.hidden
    with torch.no_grad():
        for i, (old, new) in enumerate(zip(model.layers, small.layers)):
            new.weight.copy_(old.weight[:H, : (old.weight.shape[1] if i == 0 else H)])
            new.bias.copy_(old.bias[:H])
        small.head.weight.copy_(model.head.weight[:, :H])
        small.head.bias.copy_(model.head.bias)
    return small.eval()


def example_masks(n: int, n_hidden: int, extra: int, density: float, generator: torch.Generator) -> torch.Tensor:
    """Example-tied masks ``(n, n_hidden, extra)``: each example opens a fixed random ``density`` share of the extra
    units of every layer (at least one), for the whole of training (Maini et al. 2023's example-tied dropout)."""
    k = max(1, int(round(density * extra)))
    order = torch.rand(n, n_hidden, extra, generator=generator).argsort(dim=-1)
    return (order < k).float()  # (n, n_hidden, extra), k ones per row


def npo_loss(logits: torch.Tensor, y: torch.Tensor, ref_logp: torch.Tensor, beta: float) -> torch.Tensor:
    """Negative preference optimisation on forget examples: ``(2/β) mean log(1 + (π_θ(y|x) / π_ref(y|x))^β)``.

    Arguments:
        logits: ``(batch, classes)`` of the model being unlearned. y: ``(batch,)`` the (corrupted) labels to forget.
        ref_logp: ``(batch,)`` log π_ref(y|x) of the original model.
    """
    logp = F.log_softmax(logits, dim=-1).gather(1, y[:, None]).squeeze(1)  # (batch,)
    return 2.0 / beta * F.softplus(beta * (logp - ref_logp)).mean()


def retain_and_forget_loss(kind: str, weight: float, beta: float):
    """The loss of the NPO and gradient-ascent baselines on a batch ``(x_r, y_r, x_f, y_f, ref_f)``: cross-entropy
    on the retain batch plus ``weight`` times the forget term (NPO, or the negated cross-entropy for ``ga``)."""

    def loss(model: nn.Module, batch) -> torch.Tensor:
        x_r, y_r, x_f, y_f, ref_f = batch
        retain = F.cross_entropy(model(x_r), y_r)
        logits_f = model(x_f)
        forget = npo_loss(logits_f, y_f, ref_f, beta) if kind == "npo" else -F.cross_entropy(logits_f, y_f)
        return retain + weight * forget

    return loss


def rem_loss(weight: float, beta: float, redirect: bool = True):
    """REM's loss on a batch ``(x_r, y_r, m_r, x_f, y_f, ref_f, m_f)``:

    * fine-tuning with masks: cross-entropy of the retain batch, each example through its own mask ``m_r``;
    * redirection: cross-entropy of the discovered corrupted examples *with their corrupted labels* through the
      one mask ``m_f`` they share, so the extra units it opens learn to explain them;
    * NPO through the base units: the same forget examples with every extra unit off (the model that remains
      after discarding) are pushed away from their corrupted labels.

    ``redirect=False`` drops the redirection term (the ablation: extra units and masks, but no home for ``D_f``).
    """

    def loss(model: nn.Module, batch) -> torch.Tensor:
        x_r, y_r, m_r, x_f, y_f, ref_f, m_f = batch
        total = F.cross_entropy(model(x_r, m_r), y_r)
        base = model(x_f, None)  # (batch, classes): the model that remains after discarding
        if redirect:
            # the extra units must explain the corrupted labels on top of the base prediction, which this term
            # leaves where it is (the base units learn nothing from the corrupted labels here)
            redirected = base.detach() + (model(x_f, m_f) - base)
            total = total + F.cross_entropy(redirected, y_f)
        return total + weight * npo_loss(base, y_f, ref_f, beta)

    return loss


@torch.no_grad()
def extra_share(model: MaskedMLP, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """How much of each example's logits the extra units carry: ``|f(x, mask) - f(x, off)| / |f(x, mask)|``,
    ``(batch,)``."""
    on, off = model(x, mask), model(x, None)
    return (on - off).norm(dim=1) / on.norm(dim=1).clamp_min(1e-12)
