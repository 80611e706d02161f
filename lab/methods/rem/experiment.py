"""REM experiments: every corruption at every discovery rate, every unlearning method, over seeds; Utility, Healed
and their product, and what REM's redirected units absorbed."""

from __future__ import annotations

import torch
import xarray as xr
from tqdm.auto import tqdm

from lab.core.runtime import threads
from lab.methods.rem import model as M
from lab.methods.rem.config import Config
from lab.methods.rem.train import METHODS, accuracy, corrupted, load_data, original, unlearn_cell
from lab.results import Coord, Schema, Var

__all__ = ["run"]

GROUPS = ("discovered", "undiscovered", "clean")
UNITS = ("on", "off")

_CELL = ("seed", "corruption", "rate")
_SCORE = (*_CELL, "algorithm")
_EMPTY = "a group with no example in the cell (none undiscovered at discovery rate 1) stays NaN"
SCHEMA = Schema(
    Var("utility", _SCORE, "Utility: test accuracy", "%"),
    Var("healed", _SCORE, "Healed: accuracy on every corrupted training example w.r.t. its true label (inputs as "
                          "corrupted)", "%"),
    Var("score", _SCORE, "Utility x Healed / 100", "%"),
    Var("memorised", _SCORE, "accuracy on the corrupted examples w.r.t. their corrupted labels", "%"),
    Var("clean_train", _SCORE, "accuracy on the clean training examples", "%"),
    Var("healed_discovered", _SCORE, "Healed on the discovered corrupted examples", "%"),
    Var("memorised_discovered", _SCORE, "accuracy on the discovered corrupted examples (the forget set) w.r.t. their "
                                        "corrupted labels: what a forget term removes", "%"),
    Var("healed_undiscovered", _SCORE, "Healed on the undiscovered corrupted examples (NaN at discovery rate 1)",
        "%"),
    Var("rem_absorbed", (*_CELL, "group", "units"),
        "REM before discarding: accuracy w.r.t. the training labels (corrupted ones for the corrupted groups) with "
        "each example's mask open (on) and with the extra units off (off = the unlearned model)", "%",
        missing=_EMPTY),
    Var("rem_extra_share", (*_CELL, "group"),
        "REM before discarding: |f(x, mask) - f(x, off)| / |f(x, mask)|, the share of the logits the extra units "
        "carry (mean)", missing=_EMPTY),
    Var("n_forget", _CELL, "discovered corrupted examples (the forget set)", "examples", dtype=int),
    Var("n_corrupted", ("seed", "corruption"), "corrupted training examples", "examples", dtype=int),
    coords={"corruption": Coord("corruption, from irregular (random labels) to regular (backdoor)"),
            "rate": Coord("discovery rate", "1"), "algorithm": Coord("unlearning method (original: none)")},
)


def _score_methods(res, i: tuple[int, int, int], cell, data, bad, known: torch.Tensor, hidden: torch.Tensor) -> None:
    """Every unlearned model of one cell ``i`` (seed, corruption, rate): Utility, Healed and the accuracies on each
    group of training examples."""
    is_bad = bad.corrupted
    for m, name in enumerate(METHODS):
        net = cell.models[name]
        res["utility"][(*i, m)] = accuracy(net, data.x_test, data.y_test)
        res["healed"][(*i, m)] = accuracy(net, bad.x[is_bad], bad.y_true[is_bad])
        res["memorised"][(*i, m)] = accuracy(net, bad.x[is_bad], bad.y[is_bad])
        res["clean_train"][(*i, m)] = accuracy(net, bad.x[~is_bad], bad.y[~is_bad])
        res["healed_discovered"][(*i, m)] = accuracy(net, bad.x[known], bad.y_true[known])
        res["memorised_discovered"][(*i, m)] = accuracy(net, bad.x[known], bad.y[known])
        res["healed_undiscovered"][(*i, m)] = accuracy(net, bad.x[hidden], bad.y_true[hidden])


def _rem_absorbed(res, i: tuple[int, int, int], cell, bad, known: torch.Tensor, hidden: torch.Tensor) -> None:
    """What REM's extra units absorbed in cell ``i``, before they are discarded: per group of training examples
    (:data:`GROUPS`; an empty group is skipped), the accuracy with the masks open and with the extra units off, and
    the share of the logits they carry."""
    big, (masks, _) = cell.rem_full["rem"], cell.masks["rem"]
    for g, sel in enumerate((known, hidden, ~bad.corrupted)):
        if not bool(sel.any()):
            continue
        for u, mask in enumerate((masks[sel], None)):
            res["rem_absorbed"][(*i, g, u)] = accuracy(big, bad.x[sel], bad.y[sel], mask)
        res["rem_extra_share"][(*i, g)] = float(M.extra_share(big, bad.x[sel], masks[sel]).mean())


def run(cfg: Config, progress: bool = True) -> xr.Dataset:
    """Corrupt the training set (each corruption, each seed), train the original model, and unlearn at each
    discovery rate with every method of :data:`lab.methods.rem.train.METHODS`.

    Returns:
        Dataset with dims seed, corruption, rate, algorithm (scores) and group, units (REM's extra units).
    """
    data = load_data(cfg)
    res = SCHEMA.new(seed=list(cfg.seeds), corruption=list(cfg.corruptions), rate=list(cfg.discovery_rates),
                     algorithm=list(METHODS), group=list(GROUPS), units=list(UNITS))
    bar = tqdm(total=cfg.n_seeds * len(cfg.corruptions) * len(cfg.discovery_rates), desc="REM cells",
               disable=not progress)
    with threads(cfg.threads):
        for s, seed in enumerate(cfg.seeds):
            for c, kind in enumerate(cfg.corruptions):
                bad = corrupted(cfg, data, kind, seed)
                res["n_corrupted"][s, c] = int(bad.corrupted.sum())
                start = original(cfg, data, bad, seed)
                for r, rate in enumerate(cfg.discovery_rates):
                    cell = unlearn_cell(cfg, data, bad, rate, seed, start)
                    known = torch.zeros_like(bad.corrupted)
                    known[cell.forget] = True
                    hidden = bad.corrupted & ~known
                    res["n_forget"][s, c, r] = len(cell.forget)
                    _score_methods(res, (s, c, r), cell, data, bad, known, hidden)
                    _rem_absorbed(res, (s, c, r), cell, bad, known, hidden)
                    bar.update(1)
    bar.close()
    res["score"] = res["utility"][...] * res["healed"][...] / 100.0
    return res.build(attrs={"dataset": cfg.dataset, "n_train": len(data.y_train), "n_test": len(data.y_test),
                            "corrupt_fraction": cfg.corrupt_fraction})
