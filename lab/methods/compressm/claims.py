"""CompreSSM's claims, each read from the run's Dataset alone, at the claim τ.

First the regime: the paper's comparison with a model trained small from scratch says something only where the
state size limits the model, so ``size_matters`` checks that the full model beats the from-scratch model at
CompreSSM's final size by more than 2 pt on more than 3/4 of the seeds (:data:`REGIME`); the same check gates the
paper's claims as a competence (where it fails, they read "control not competent", whatever their own numbers).
Then the paper's two claims, counted in seeds (``seed_share``): in-training reduction beats training small from
scratch (the headline) and keeps the full model's accuracy (the mean over seeds); keeping the states of largest HSV
beats keeping random states.

Every claim is measured on each seed and states its statistic (a share of seeds, or the mean over seeds).
Each has a control computed in the same run: the random-truncation run in place of CompreSSM, a second
from-scratch model in place of CompreSSM, a random truncation in place of balanced truncation at the cut; or states
why none makes sense. Every trained model a claim compares against, and every trained control, carries a competence
check: its final test accuracy more than halfway from chance to 100% on every seed (it learned the task). The random
truncations at the cut are analytic (random selection, no training of their own); the measurement compares balanced
truncation with the mean of draws 1, 2, ..., read two standard errors of that mean low (the draws scatter by tens of
points), and the control puts draw 0, which that mean leaves out, in its place.
The headline is ``beats_scratch``: the paper's central result that models which start large and shrink beat those
trained at the small size. The training-time claim reads counted work (multiply-adds), which does not move with the
machine's load; the time replayed with the sizes' steps timed in turn in one process is a report row.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from lab.claims import (
    MIN_SEED_SHARE,
    SEED_SHARE_UNIT,
    Claim,
    Competence,
    Measurement,
    Pick,
    difference,
    over_seeds,
    ratio,
    share,
)

#: a trained model has learned the task when its accuracy is more than this share of the way from chance to 100%
LEARNED = 0.5


def _at(ds: xr.Dataset, var: str, model: str | None = None) -> xr.DataArray:
    da = ds[var].sel(tau=float(ds.attrs["claim_tau"]))
    return da if model is None else da.sel(model=model)


def _claim_tau(ds: xr.Dataset) -> float:
    return float(ds.attrs["claim_tau"])


def _final(model: str, label: str, var: str = "accuracy", unit: str = "%") -> Pick:
    """A model's ``var`` (final test accuracy) at the claim τ, per seed."""
    return Pick(var, label, sel={"tau": _claim_tau, "model": model}, unit=unit)


def _fraction(ds: xr.Dataset) -> Measurement:
    total = ds.attrs["d_state"] * ds.attrs["n_layers"]
    size = _at(ds, "state_size", "compressm").sum("layer")
    return over_seeds(size.values / total, "mean",
                      f"{float(size.mean()):.1f} of {total} states at τ = {ds.attrs['claim_tau']:g}")


def _last_cut(ds: xr.Dataset) -> tuple[list[int], list[int]]:
    """Per seed, the index of the last check that cut something at the claim τ (the most-trained model cut)."""
    cut = _at(ds, "cut_accuracy")  # (seed, check, cut)
    seeds, checks = [], []
    for j in range(cut.sizes["seed"]):
        done = np.flatnonzero(np.isfinite(cut.isel(seed=j).sel(cut="hsv").values))
        if len(done):
            seeds.append(j)
            checks.append(int(done[-1]))
    if not seeds:
        raise ValueError("no reduction was applied at the claim τ")
    return seeds, checks


#: standard errors below the mean gap at which the right-after-the-cut comparison is read (a one-sided bound)
CUT_SE = 2.0


def _cut_rows(ds: xr.Dataset) -> tuple[np.ndarray, np.ndarray, str]:
    """At each seed's last cut: the accuracy before it and after balanced truncation ``(seed, 2)``, each random
    truncation's ``(seed, draw)``, and the cuts' steps."""
    if ds.sizes["draw"] < 3:
        raise ValueError("the claim needs cut_draws >= 3 (draw 0 is the control, at least two others the reference)")
    cut, draws = _at(ds, "cut_accuracy"), _at(ds, "cut_random_accuracy")
    seeds, checks = _last_cut(ds)
    kept = np.array([cut.isel(seed=j, check=c).sel(cut=["before", "hsv"]).values for j, c in zip(seeds, checks)])
    rand = np.array([draws.isel(seed=j, check=c).values for j, c in zip(seeds, checks)])
    return kept, rand, ", ".join(str(int(cut.check[c])) for c in checks)


def _cut_bound(stand_in: np.ndarray, rand: np.ndarray, what: str) -> Measurement:
    """``stand_in`` (per seed) minus the mean of the reference draws 1, 2, ..., read CUT_SE standard errors of
    that mean low (the draws' own spread): the pooled bound over seeds, and each seed's own bound."""
    ref = rand[:, 1:]  # (seed, draw): draw 0 is the control's
    se = ref.std(axis=1, ddof=1) / np.sqrt(ref.shape[1])  # (seed,)
    gap = stand_in - ref.mean(axis=1)
    pooled = float(gap.mean() - CUT_SE * np.sqrt((se ** 2).sum()) / len(gap))
    return Measurement(pooled, f"{what}: mean gap {gap.mean():.1f} pt over the random draws 1-{ref.shape[1]}, "
                               f"less {CUT_SE:g} standard errors of their mean (the draws' standard deviation "
                               f"{ref.std(axis=1, ddof=1).mean():.1f} pt, mean over seeds)",
                       tuple(float(v) for v in gap - CUT_SE * se))


def _cut(ds: xr.Dataset) -> Measurement:
    kept, rand, steps = _cut_rows(ds)
    m = _cut_bound(kept[:, 1], rand, "balanced truncation")
    return Measurement(m.value, f"last cut (step {steps}): before {kept[:, 0].mean():.1f}%, balanced truncation "
                                f"{kept[:, 1].mean():.1f}%, random states {rand[:, 1:].mean():.1f}%; {m.detail}",
                       m.per_seed)


def _cut_control(ds: xr.Dataset) -> Measurement:
    _, rand, _ = _cut_rows(ds)
    return _cut_bound(rand[:, 0], rand, f"random draw 0 ({rand[:, 0].mean():.1f}%)")


def _learned(model: str):
    """A trained model's final accuracy at the claim τ, as its share of the way from chance to 100%, worst seed."""

    def measure(ds: xr.Dataset) -> Measurement:
        acc = _at(ds, "accuracy", model).values
        chance = 100.0 / int(ds.attrs["n_classes"])
        return over_seeds((acc - chance) / (100.0 - chance), "min",
                          f"{model} {float(acc.min()):.1f}% on its worst seed (chance {chance:.0f}%)")

    return measure


def _competent(*models: str) -> tuple[Competence, ...]:
    return tuple(Competence(label=f"{m}, final test accuracy (worst seed)", measure=_learned(m), op=">",
                            threshold=LEARNED,
                            threshold_source="more than halfway from chance to 100% (55% for 10 classes): a model "
                                             "at or below it has not learned the task (our convention)",
                            unit="of chance to 100%") for m in models)


#: the regime: the full model beats from scratch at CompreSSM's final size by more than this (pt) on every seed
REGIME_MARGIN = 2.0
#: a win counts when the winner is more than this many points ahead on that seed (4.5 test digits)
WIN_MARGIN = 1.0

_SIZE_MATTERS = share(_final("full", "full"), _final("scratch", "from scratch at CompreSSM's size"),
                      margin=REGIME_MARGIN, what="full above from scratch at CompreSSM's final size")
#: the gate of the paper's claims: where the small size does not limit the model, training small catches up
REGIME = Competence(label=f"regime: full above from scratch at CompreSSM's size by > {REGIME_MARGIN:g} pt (seeds)",
                    measure=_SIZE_MATTERS, op=">", threshold=MIN_SEED_SHARE,
                    threshold_source="the issue's gate: the state size must matter (full beats the small model "
                                     "trained from scratch by at least 2 pt) before starting large can help",
                    unit=SEED_SHARE_UNIT)


def _in_training_cpu(ds: xr.Dataset) -> str:
    """training_time_replayed's note: the CPU time measured during training, per the full model's."""
    cpu = float((_at(ds, "train_cost", "compressm") / _at(ds, "train_cost", "full")).mean())
    return f"the CPU time measured during training, which moves with the machine's load: {cpu:.2f} x full"


CLAIMS = [
    Claim(
        name="size_matters",
        statement="The regime: the full model beats the same architecture trained from scratch at CompreSSM's "
                  "final size by more than 2 pt, on more than 3/4 of the seeds (the gate of the paper's claims)",
        source="the paper's setting (sMNIST, H = 8, N = 256): few channels, so that the state size matters",
        measure=_SIZE_MATTERS,
        op=">",
        threshold=MIN_SEED_SHARE,
        threshold_source="more than 3/4 of the seeds (all of 3)",
        unit=SEED_SHARE_UNIT,
        control=share(_final("scratch_b", "second from-scratch model"), _final("scratch", "from scratch"),
                      margin=REGIME_MARGIN, what="second from-scratch model above the first"),
        control_label="a second from-scratch model (other seed) in full's place: the gap two seeds make",
        competence=_competent("full", "scratch", "scratch_b"),
    ),
    Claim(
        name="beats_scratch",
        statement="Models that start large and shrink beat the same architecture trained at the small size by "
                  "more than 1 pt, on more than 3/4 of the seeds",
        source="paper's abstract and Fig. (reduced vs trained directly at smaller dimension)",
        measure=share(_final("compressm", "CompreSSM"), _final("scratch", "from scratch"), margin=WIN_MARGIN,
                      what="CompreSSM above from scratch at its final size"),
        op=">",
        threshold=MIN_SEED_SHARE,
        threshold_source="more than 3/4 of the seeds (all of 3), each by more than 1 pt (4.5 test digits)",
        unit=SEED_SHARE_UNIT,
        control=share(_final("scratch_b", "second from-scratch model"), _final("scratch", "from scratch"),
                      margin=WIN_MARGIN, what="second from-scratch model above the first"),
        control_label="a second from-scratch model (other seed) in CompreSSM's place: the gap two seeds make",
        competence=(*_competent("scratch", "scratch_b"), REGIME),
        headline=True,
    ),
    Claim(
        name="accuracy_kept",
        statement="The reduced model keeps the full model's accuracy (mean over seeds)",
        source="CompreSSM README: sMNIST 97.3% (N = 256) vs 96.9% at τ = 2%",
        measure=difference(_final("full", "full"), _final("compressm", "CompreSSM"), what="full minus CompreSSM"),
        op="<=",
        threshold=1.0,
        threshold_source="the lab's plan: within 1 pt of the full model",
        unit="pt",
        control=difference(_final("full", "full"), _final("random", "random truncation"),
                           what="full minus random truncation"),
        control_label="truncation to the same ranks keeping random states: must lose more than 1 pt",
        competence=(*_competent("full", "random"), REGIME),
    ),
    Claim(
        name="hsv_beats_random_final",
        statement="Keeping the states of largest HSV beats keeping random states, in final accuracy after "
                  "training on, by more than 1 pt on more than 3/4 of the seeds",
        source="paper's ablation: truncating random states instead of the smallest-HSV ones",
        measure=share(_final("compressm", "CompreSSM"), _final("random", "random truncation"), margin=WIN_MARGIN,
                      what="CompreSSM above random truncation"),
        op=">",
        threshold=MIN_SEED_SHARE,
        threshold_source="more than 3/4 of the seeds (all of 3), each by more than 1 pt, as for beats_scratch",
        unit=SEED_SHARE_UNIT,
        control=share(_final("random_b", "second random truncation"), _final("random", "random truncation"),
                      margin=WIN_MARGIN, what="second random truncation above the first"),
        control_label="a second random-truncation run (other draws) in CompreSSM's place: the gap draws make",
        competence=(*_competent("random", "random_b"), REGIME),
    ),
    Claim(
        name="hsv_beats_random_at_cut",
        statement="Right after a cut, keeping the dimensions of large HSV preserves the model; random ones do "
                  "not (the mean gap over seeds, less two standard errors of the random draws' mean)",
        source="paper: Hankel singular values measure each dimension's energy; balanced truncation bound",
        measure=_cut,
        op=">=",
        threshold=3.0,
        threshold_source="the lab's plan: largest-HSV truncation beats random by >= 3 pts right after "
                         "the cut (at the last cut, the most-trained model that was cut), as a one-sided bound: one "
                         "random draw differs from another by tens of points there",
        unit="pt",
        control=_cut_control,
        control_label="random draw 0 in balanced truncation's place, against the same reference (draws 1, 2, ...; "
                      "draw 0 is not among them)",
        control_analytic="random selection of the pre-cut model's states to the same ranks: no training of its own",
    ),
    Claim(
        name="compressed_size",
        statement="In-training reduction ends at a small fraction of the initial state size (mean over seeds)",
        source="CompreSSM README: sMNIST N = 256 -> ~28 states at τ = 2% (11%)",
        measure=_fraction,
        op="<=",
        threshold=0.3,
        threshold_source="the lab's plan: final r <= 0.3 N",
        unit="of N",
        no_control="the size is what the rank rule produces from the HSVs (the random-truncation run reaches "
                   "similar ranks by construction); the accuracy claims below carry the controls",
    ),
    Claim(
        name="training_speedup",
        statement="Reduction early in training makes training cheaper: fewer multiply-adds (mean over seeds)",
        source="paper's abstract: in-training reduction significantly accelerates optimization",
        measure=ratio(_final("compressm", "CompreSSM", "train_work", " MAC"),
                      _final("full", "full", "train_work", " MAC"), what="multiply-adds of the training"),
        op="<=",
        threshold=0.9,
        threshold_source="a saving of at least 10% (our convention), in counted multiply-adds of the training "
                         "steps and reductions, which do not move with the machine's load",
        unit="x full",
        no_control="counted work follows from the state sizes: the run without reduction is the reference (1 by "
                   "construction); the replayed time is the report row below",
    ),
    Claim(
        name="training_time_replayed",
        statement="Training time of CompreSSM relative to the full model, per-step overheads included (reported "
                  "beside the counted work; mean over seeds)",
        source="paper's abstract: in-training reduction significantly accelerates optimization",
        measure=ratio(_final("compressm", "CompreSSM", "train_time_replayed", " s"),
                      _final("full", "full", "train_time_replayed", " s"), note=_in_training_cpu,
                      what="one-thread step times at each size taken in turn in one process"),
        op="<=",
        threshold=0.9,
        threshold_source="shown beside training_speedup, no verdict",
        unit="x full",
        report=True,
    ),
]
