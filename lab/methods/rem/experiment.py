"""REM experiments: every corruption at every discovery rate, every unlearning method, over seeds; Utility, Healed
and their product, and what REM's redirected units absorbed."""

from __future__ import annotations

import xarray as xr

from lab.methods.rem.config import Config
from lab.methods.rem.pool import GROUPS, SCORES, UNITS, score_all
from lab.methods.rem.train import METHODS, load_data
from lab.results import Coord, Schema, Var

__all__ = ["run"]

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


def run(cfg: Config, progress: bool = True) -> xr.Dataset:
    """Corrupt the training set (each corruption, each seed), train the original model, and unlearn at each
    discovery rate with every method of :data:`lab.methods.rem.train.METHODS` (every seed and corruption side by
    side: :func:`lab.methods.rem.pool.score_all`).

    Returns:
        Dataset with dims seed, corruption, rate, algorithm (scores) and group, units (REM's extra units).
    """
    data = load_data(cfg)
    res = SCHEMA.new(seed=list(cfg.seeds), corruption=list(cfg.corruptions), rate=list(cfg.discovery_rates),
                     algorithm=list(METHODS), group=list(GROUPS), units=list(UNITS))
    scored = score_all(cfg, len(data.y_train), progress=progress)
    for s, seed in enumerate(cfg.seeds):
        for c, kind in enumerate(cfg.corruptions):
            out = scored[seed, kind]
            res["n_corrupted"][s, c] = out["n_corrupted"]
            res["n_forget"][s, c] = out["n_forget"]
            for var in SCORES:
                res[var][s, c] = out[var]  # (rates, methods)
            for r in range(len(cfg.discovery_rates)):
                for g in range(len(GROUPS)):
                    share = float(out["rem_extra_share"][r, g])
                    if share == share:  # an empty group's cells stay unwritten (NaN)
                        res["rem_extra_share"][s, c, r, g] = share
                        for u in range(len(UNITS)):
                            res["rem_absorbed"][s, c, r, g, u] = float(out["rem_absorbed"][r, g, u])
    res["score"] = res["utility"][...] * res["healed"][...] / 100.0
    return res.build(attrs={"dataset": cfg.dataset, "n_train": len(data.y_train), "n_test": len(data.y_test),
                            "corrupt_fraction": cfg.corrupt_fraction})
