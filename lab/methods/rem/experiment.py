"""REM experiments: every corruption at every discovery rate, every unlearning method, over seeds; Utility, Healed
and their product, and what REM's redirected units absorbed."""

from __future__ import annotations

import numpy as np
import torch
import xarray as xr
from tqdm.auto import tqdm

from lab.core.runtime import threads
from lab.methods.rem import model as M
from lab.methods.rem.config import Config
from lab.methods.rem.train import METHODS, accuracy, corrupted, load_data, original, unlearn_cell

__all__ = ["run"]

GROUPS = ("discovered", "undiscovered", "clean")
UNITS = ("on", "off")


def run(cfg: Config, progress: bool = True) -> xr.Dataset:
    """Corrupt the training set (each corruption, each seed), train the original model, and unlearn at each
    discovery rate with every method of :data:`lab.methods.rem.train.METHODS`.

    Returns:
        Dataset with dims seed, corruption, rate, method (scores) and group, units (REM's extra units).
    """
    data = load_data(cfg)
    S, C, R, Mn = cfg.n_seeds, len(cfg.corruptions), len(cfg.discovery_rates), len(METHODS)
    shape = (S, C, R, Mn)
    utility, healed, memorised, clean, healed_f, healed_u, memorised_f = (np.full(shape, np.nan) for _ in range(7))
    absorbed = np.full((S, C, R, len(GROUPS), len(UNITS)), np.nan)
    share = np.full((S, C, R, len(GROUPS)), np.nan)
    n_forget = np.zeros((S, C, R), dtype=np.int64)
    n_corrupt = np.zeros((S, C), dtype=np.int64)
    bar = tqdm(total=S * C * R, desc="REM cells", disable=not progress)
    with threads(cfg.threads):
        for s, seed in enumerate(cfg.seeds):
            for c, kind in enumerate(cfg.corruptions):
                bad = corrupted(cfg, data, kind, seed)
                is_bad = bad.corrupted
                n_corrupt[s, c] = int(is_bad.sum())
                start = original(cfg, data, bad, seed)
                for r, rate in enumerate(cfg.discovery_rates):
                    cell = unlearn_cell(cfg, data, bad, rate, seed, start)
                    known = torch.zeros_like(is_bad)
                    known[cell.forget] = True
                    hidden = is_bad & ~known
                    n_forget[s, c, r] = len(cell.forget)
                    for m, name in enumerate(METHODS):
                        net = cell.models[name]
                        utility[s, c, r, m] = accuracy(net, data.x_test, data.y_test)
                        healed[s, c, r, m] = accuracy(net, bad.x[is_bad], bad.y_true[is_bad])
                        memorised[s, c, r, m] = accuracy(net, bad.x[is_bad], bad.y[is_bad])
                        clean[s, c, r, m] = accuracy(net, bad.x[~is_bad], bad.y[~is_bad])
                        healed_f[s, c, r, m] = accuracy(net, bad.x[known], bad.y_true[known])
                        memorised_f[s, c, r, m] = accuracy(net, bad.x[known], bad.y[known])
                        healed_u[s, c, r, m] = accuracy(net, bad.x[hidden], bad.y_true[hidden])
                    big, (masks, _) = cell.rem_full["rem"], cell.masks["rem"]
                    for g, sel in enumerate((known, hidden, ~is_bad)):
                        if not bool(sel.any()):
                            continue
                        for u, mask in enumerate((masks[sel], None)):
                            absorbed[s, c, r, g, u] = accuracy(big, bad.x[sel], bad.y[sel], mask)
                        share[s, c, r, g] = float(M.extra_share(big, bad.x[sel], masks[sel]).mean())
                    bar.update(1)
    bar.close()
    score = utility * healed / 100.0
    dims = ("seed", "corruption", "rate", "algorithm")
    ds = xr.Dataset(
        {
            "utility": (dims, utility, {"long_name": "Utility: test accuracy", "units": "%"}),
            "healed": (dims, healed, {"long_name": "Healed: accuracy on every corrupted training example w.r.t. "
                                                  "its true label (inputs as corrupted)", "units": "%"}),
            "score": (dims, score, {"long_name": "Utility x Healed / 100", "units": "%"}),
            "memorised": (dims, memorised, {"long_name": "accuracy on the corrupted examples w.r.t. their "
                                                        "corrupted labels", "units": "%"}),
            "clean_train": (dims, clean, {"long_name": "accuracy on the clean training examples", "units": "%"}),
            "healed_discovered": (dims, healed_f, {"long_name": "Healed on the discovered corrupted examples",
                                                   "units": "%"}),
            "memorised_discovered": (dims, memorised_f,
                                     {"long_name": "accuracy on the discovered corrupted examples (the forget set) "
                                                   "w.r.t. their corrupted labels: what a forget term removes",
                                      "units": "%"}),
            "healed_undiscovered": (dims, healed_u, {"long_name": "Healed on the undiscovered corrupted examples "
                                                                  "(NaN at discovery rate 1)", "units": "%"}),
            "rem_absorbed": (("seed", "corruption", "rate", "group", "units"), absorbed,
                             {"long_name": "REM before discarding: accuracy w.r.t. the training labels (corrupted "
                                           "ones for the corrupted groups) with each example's mask open (on) and "
                                           "with the extra units off (off = the unlearned model)", "units": "%"}),
            "rem_extra_share": (("seed", "corruption", "rate", "group"), share,
                                {"long_name": "REM before discarding: |f(x, mask) - f(x, off)| / |f(x, mask)|, the "
                                              "share of the logits the extra units carry (mean)", "units": "1"}),
            "n_forget": (("seed", "corruption", "rate"), n_forget,
                         {"long_name": "discovered corrupted examples (the forget set)", "units": "examples"}),
            "n_corrupted": (("seed", "corruption"), n_corrupt,
                            {"long_name": "corrupted training examples", "units": "examples"}),
        },
        coords={
            "seed": ("seed", list(cfg.seeds)),
            "corruption": ("corruption", list(cfg.corruptions),
                           {"long_name": "corruption, from irregular (random labels) to regular (backdoor)"}),
            "rate": ("rate", list(cfg.discovery_rates), {"long_name": "discovery rate", "units": "1"}),
            "algorithm": ("algorithm", list(METHODS), {"long_name": "unlearning method (original: none)"}),
            "group": ("group", list(GROUPS)),
            "units": ("units", list(UNITS)),
        },
        attrs={"dataset": cfg.dataset, "n_train": len(data.y_train), "n_test": len(data.y_test),
               "corrupt_fraction": cfg.corrupt_fraction},
    )
    return ds
