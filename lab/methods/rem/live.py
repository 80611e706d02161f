"""What the ``forgetting`` dashboard (and a notebook) calls besides ``run``: the whole grid of a profile, and one
cell's REM model looked at closely.

:func:`grid` is the profile's run (cached on disk under ``<data>/`` by its Config, and in memory);
:func:`redirected` trains REM on one cell of one seed (the original model comes from the cache) and says where the
predictions of the corrupted examples go with the extra units open and after discarding them.
"""

from __future__ import annotations

import torch
import xarray as xr

from lab.cache import cached_run, memo
from lab.checks import check_choice, check_int, check_real
from lab.methods.rem import model as M
from lab.methods.rem.config import CORRUPTIONS, Config
from lab.methods.rem.corruptions import discover
from lab.methods.rem.train import FORMAT, corrupted, load_data, log_prob, original, rem

__all__ = ["grid", "redirected"]


@memo(maxsize=4)
def grid(profile: str = "quick") -> xr.Dataset:
    """The profile's grid: :func:`lab.methods.rem.experiment.run` on the profile's Config (disk and memory cache,
    keyed by the fields that decide the results; the report's current run when there is one, else minutes on first
    use at quick)."""
    from lab.methods.rem.experiment import run

    cfg = Config.from_profile(profile)
    return cached_run("rem-grid", "rem", cfg, lambda: run(cfg, progress=False), version=FORMAT)


def _outcomes(model, x, y_bad, y_true, mask) -> dict[str, float]:
    pred = model(x, mask).argmax(-1)
    n = max(len(y_bad), 1)
    bad, true = pred == y_bad, pred == y_true
    return {"corrupted label": float(bad.sum()) / n, "true label": float(true.sum()) / n,
            "other": float((~bad & ~true).sum()) / n}


@memo(maxsize=32)
def redirected(profile: str, corruption: str, rate: float, seed: int = 0) -> dict:
    """REM on one cell: where the corrupted examples' predictions go, with each example's mask open and after the
    extra units are discarded, and how much of the logits the extra units carry.

    Arguments:
        profile: whose Config. corruption: one of the corruptions. rate: discovery rate in (0, 1].
        seed: the run's seed (the profile's seed plus this offset).
    Returns:
        ``{"corruption", "rate", "seed", "n_forget", "outcomes": {group: {"units on" | "discarded": {"corrupted
        label", "true label", "other"}: share}}, "share_forget", "share_clean"}``; groups ``discovered`` and, below
        rate 1, ``undiscovered``.
    """
    check_choice("corruption", corruption, CORRUPTIONS)
    check_real("rate", rate, 0.0, 1.0, lo_open=True)
    check_int("seed", seed, 0, 10_000)
    cfg = Config.from_profile(profile)
    seed = cfg.seed + seed
    data = load_data(cfg)
    bad = corrupted(cfg, data, corruption, seed)
    start = original(cfg, data, bad, seed)
    forget, retain = discover(bad, rate)
    ref = log_prob(start, bad.x[forget], bad.y[forget])
    big, masks, _ = rem(cfg, start, bad, forget, retain, ref, seed)
    known = torch.zeros(len(bad.y), dtype=torch.bool)
    known[forget] = True
    groups = {"discovered": known, "undiscovered": bad.corrupted & ~known}
    out = {}
    with torch.no_grad():
        for name, sel in groups.items():
            if not bool(sel.any()):
                continue
            x, yb, yt = bad.x[sel], bad.y[sel], bad.y_true[sel]
            out[name] = {"units on": _outcomes(big, x, yb, yt, masks[sel]),
                         "discarded": _outcomes(big, x, yb, yt, None)}
        clean = ~bad.corrupted
        share_f = float(M.extra_share(big, bad.x[known], masks[known]).mean())
        share_c = float(M.extra_share(big, bad.x[clean], masks[clean]).mean())
    return {"corruption": corruption, "rate": float(rate), "seed": seed, "n_forget": int(len(forget)),
            "outcomes": out, "share_forget": share_f, "share_clean": share_c}
