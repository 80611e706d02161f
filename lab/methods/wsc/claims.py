"""WSC's claims, each read from the run's Dataset alone, at the claim memory share (large memory).

Every claim is measured on each seed (paired: the variants of a seed share the stream, the task-0 model, the buffer
and the batch order) and states its statistic, with the spread in the table. Controls come from the same run: a
second replay run that differs from replay only in its mini-batch order (what chance alone moves), averaging
without the reset (for the reset's claim), the reset without averaging (for the averaging's claim). Compute is a
report row: the step budgets are equal by construction, and times move with the machine's load.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from lab.claims import Claim, Measurement, over_seeds


def _at(ds: xr.Dataset, var: str, variant: str) -> np.ndarray:
    """Per seed, ``var`` of ``variant`` at the claim share."""
    return ds[var].sel(share=float(ds.attrs["claim_share"]), variant=variant).values


def _mean(x: np.ndarray) -> str:
    return f"{float(np.mean(x)):.2f}"


def _gain(var: str, a: str, b: str, what: str):
    """A measure: ``a`` minus ``b`` in ``var``, per seed, mean over seeds."""

    def measure(ds: xr.Dataset) -> Measurement:
        x, y = _at(ds, var, a), _at(ds, var, b)
        return over_seeds(x - y, "mean", f"{what}: {a} {_mean(x)} vs {b} {_mean(y)} at memory share "
                                         f"{ds.attrs['claim_share']:g}, {len(x)} seed(s)")

    return measure


def _wins(a: str, b: str):
    """A measure: the share of seeds on which ``a``'s ACC beats ``b``'s (per seed 1 or 0)."""

    def measure(ds: xr.Dataset) -> Measurement:
        x, y = _at(ds, "acc", a), _at(ds, "acc", b)
        return over_seeds((x > y).astype(float), "mean",
                          f"{a} above {b} on {int((x > y).sum())} of {len(x)} seeds")

    return measure


def _cost(ds: xr.Dataset) -> Measurement:
    cpu = _at(ds, "train_cpu_time", "wsc") / _at(ds, "train_cpu_time", "replay")
    wall = _at(ds, "train_time", "wsc") / _at(ds, "train_time", "replay")
    steps = _at(ds, "train_steps", "wsc") / _at(ds, "train_steps", "replay")
    return over_seeds(cpu, "mean", f"CPU time; wall time {_mean(wall)} x replay; optimiser steps "
                                   f"{float(np.mean(steps)):.3g} x replay (equal budgets)")


def _plasticity_drop(ds: xr.Dataset) -> Measurement:
    p = ds.plasticity.sel(variant="replay")
    small, large = float(ds.share.min()), float(ds.attrs["claim_share"])
    drop = p.sel(share=small).values - p.sel(share=large).values
    return over_seeds(drop, "mean", f"replay's newest-task accuracy {_mean(p.sel(share=small).values)}% at memory "
                                    f"share {small:g}, {_mean(p.sel(share=large).values)}% at {large:g}")


CLAIMS = [
    Claim(
        name="beats_replay",
        statement="With large memory WSC reaches a higher final average accuracy than replay (mean over seeds of "
                  "the paired gain)",
        source="paper Table (CIFAR-100, 10x10): WSC 74.49 / 77.71 vs replay 71.60 / 75.71 at 200 / 400 exemplars "
               "per class (+2.9 / +2.0)",
        measure=_gain("acc", "wsc", "replay", "ACC gain"),
        op=">=",
        threshold=0.5,
        threshold_source="research brief's plan: WSC mean >= replay + 0.5 pt at >= 50% memory (the paper's gains "
                         "are 1-3 pt)",
        unit="pt",
        control=_gain("acc", "replay_b", "replay", "ACC gain"),
        control_label="replay with another mini-batch order in WSC's place: the gain chance alone makes",
    ),
    Claim(
        name="beats_replay_most_seeds",
        statement="WSC beats replay on most seeds (share of seeds with a higher ACC)",
        source="paper: WSC above replay at every memory size (gains of 1-3 pt, so seeds matter)",
        measure=_wins("wsc", "replay"),
        op=">",
        threshold=0.5,
        threshold_source="a majority of seeds (the brief's plan: better on >= 4 of 5 seeds)",
        unit="of seeds",
        control=_wins("replay_b", "replay"),
        control_label="replay with another mini-batch order against replay: wins by chance",
    ),
    Claim(
        name="reset_restores_plasticity",
        statement="The rank-based reset raises accuracy on the newest task right after training it (reset only "
                  "minus replay, mean over seeds)",
        source="paper's abstract: rank-based parameter resets restore plasticity",
        measure=_gain("plasticity", "reset", "replay", "newest-task accuracy gain"),
        op=">=",
        threshold=0.5,
        threshold_source="the same 0.5 pt margin as beats_replay (our convention)",
        unit="pt",
        control=_gain("plasticity", "swa", "replay", "newest-task accuracy gain"),
        control_label="averaging without the reset in its place: must not raise it by as much",
    ),
    Claim(
        name="averaging_restores_stability",
        statement="Weight averaging reduces forgetting: higher backward transfer (averaging only minus replay, "
                  "mean over seeds)",
        source="paper's abstract: weight averaging enhances stability",
        measure=_gain("bwt", "swa", "replay", "BWT gain"),
        op=">=",
        threshold=0.5,
        threshold_source="the same 0.5 pt margin as beats_replay (our convention)",
        unit="pt",
        control=_gain("bwt", "reset", "replay", "BWT gain"),
        control_label="the reset without averaging in its place: must not raise BWT by as much",
    ),
    Claim(
        name="cost_like_replay",
        statement="WSC's training costs about what replay's does (CPU time of tasks 1.., WSC / replay, mean over "
                  "seeds)",
        source="paper: cost ~ replay's; DER and FOSTER 4-5 x",
        measure=_cost,
        op="<=",
        threshold=1.25,
        threshold_source="shown with the equal step budgets, no verdict: times move with the machine's load",
        unit="x replay",
        report=True,
    ),
    Claim(
        name="memory_costs_plasticity",
        statement="With more memory, replay learns the newest task less well (newest-task accuracy at the smallest "
                  "memory share minus at the claim share, mean over seeds)",
        source="paper's abstract: with abundant memory the challenge shifts from stability to plasticity",
        measure=_plasticity_drop,
        op=">",
        threshold=0.0,
        threshold_source="shown as the setting the method answers, no verdict (more replayed data also makes the "
                         "newest task a smaller share of each batch)",
        unit="pt",
        report=True,
    ),
]
