"""The headline's statistics: the paper's non-inferiority margin, the paired difference with a standard error
clustered by source file, and the per-seed upper bounds of a variant's loss excess over the strongest input-only
quantiser."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import xarray as xr
from scipy.stats import t as student_t

__all__ = ["CONFIDENCE", "MARGIN", "PAPER_W8A8_PPL", "Difference", "clustered_difference", "excess_bounds"]

#: the paper's WikiText2 perplexities of Mamba2-8B at W8A8 [secondary, via the research notes]: FP16, SSDi8 and
#: Quamba2 (input quantisation, the SSD in float)
PAPER_W8A8_PPL = {"fp16": 7.25, "ssdi8": 7.49, "quamba2": 7.79}
#: the headline's non-inferiority margin (%), fixed before the run from the paper: the relative loss increase of
#: SSDi8 at W8A8 over FP16 that the paper reports as "accuracy comparable to FP16", ln 7.49 / ln 7.25 - 1 = 1.64%
MARGIN = 100.0 * (math.log(PAPER_W8A8_PPL["ssdi8"]) / math.log(PAPER_W8A8_PPL["fp16"]) - 1.0)
#: one-sided confidence of the non-inferiority bound
CONFIDENCE = 0.95
#: the input-only quantisers (the SSD after its inputs in float) the headline compares against, the strongest of
#: them on each trained model
INPUT_ONLY = ("input_only", "input_group")


@dataclass(frozen=True)
class Difference:
    """Mean of a paired difference over evaluation sequences, with a standard error clustered by source file.

    Attributes:
        mean: mean of ``a - b``. se: its cluster-robust standard error (CR1: the residual sums per file, times
            G / (G - 1)); ``inf`` with fewer than two files. files: G, the files with a sequence.
        upper: one-sided upper confidence bound, ``mean + t(CONFIDENCE, G - 1) se``. naive_se: the standard error
            that treats every sequence as independent (shown beside, not used).
    """

    mean: float
    se: float
    files: int
    upper: float
    naive_se: float

    @property
    def z(self) -> float:
        """``mean / se`` (0 when both are 0, +-inf when only the standard error is)."""
        if self.se > 0:
            return self.mean / self.se
        return 0.0 if self.mean == 0 else math.copysign(math.inf, self.mean)


def clustered_difference(a, b, cluster) -> Difference:
    """The paired difference ``a - b`` per evaluation sequence, its mean and a standard error clustered by
    ``cluster`` (the source file of each sequence: windows of one file share its style, so they are not
    independent; 1024 windows come from about 70 files)."""
    d = np.asarray(a, float) - np.asarray(b, float)
    _, group = np.unique(np.asarray(cluster), return_inverse=True)
    n, g = len(d), int(group.max()) + 1 if len(d) else 0
    mean = float(d.mean())
    naive = float(d.std(ddof=1) / math.sqrt(n)) if n > 1 else math.inf
    if g < 2:
        return Difference(mean, math.inf, g, math.inf, naive)
    sums = np.bincount(group, weights=d - mean, minlength=g)
    se = math.sqrt(g / (g - 1) * float(np.sum(sums ** 2))) / n
    return Difference(mean, se, g, mean + float(student_t.ppf(CONFIDENCE, g - 1)) * se, naive)


def excess_bounds(seq: xr.DataArray, files, variant: str) -> tuple[list[float], list[str]]:
    """Per trained model of ``seq`` ``(seed, candidate, eval_seq)`` (losses per evaluation sequence): the upper
    one-sided bound (%) of ``variant``'s loss excess over the strongest input-only quantiser of that model, relative
    to that quantiser's loss, with the standard error clustered by ``files``; and a line of detail per model."""
    bounds, parts = [], []
    for seed in seq.seed.values:
        s = seq.sel(seed=seed)
        base = min(INPUT_ONLY, key=lambda v: float(s.sel(candidate=v).mean()))
        ref = float(s.sel(candidate=base).mean())
        d = clustered_difference(s.sel(candidate=variant).values, s.sel(candidate=base).values, files)
        bounds.append(100.0 * d.upper / ref)
        parts.append(f"seed {int(seed)}: {100 * d.mean / ref:+.4f}% ± {100 * d.se / ref:.4f}% over {base} "
                     f"(bound {bounds[-1]:+.4f}%; {d.z:+.1f} clustered SE, {d.mean / d.naive_se:+.1f} i.i.d. SE)")
    return bounds, parts
