"""STEER's claims, each with its control; every measurement reads the run's Dataset alone
(:func:`lab.methods.steer.experiment.run`).

=========================  ====================================================================================
claim                      control (the same measurement on a variant without the claimed property)
=========================  ====================================================================================
heldout_r2                 no plasticity: c frozen at the first or carried forward from the last training session,
                           each measured as STEER; the better of the two must fail on every benchmark in scope
heldout_r2_off_assumption  report row: heldout_r2's measure on the full-rank bcm_network, against the true model's
rule_recovered             the same regression on the inferred coefficients in shuffled session order (no law left)
rollout_r                  STEER's law driven by the wrong schedules (the test schedules rotated)
beats_baselines            the same comparison with the no-plasticity model (frozen c) in STEER's place
designed_protocol          a schedule designed with the learned law blind to the stimulation (ū terms dropped)
off_assumption_bcm         report row: the best baseline's error over STEER's on bcm_network, per seed (the margin
                           is within seed noise at the seeds a run affords)
joint_vs_two_stage         report row: the coupled (joint) fit against the two-stage fit, either way
=========================  ====================================================================================

The held-out claim is scoped to the benchmarks within the model's assumptions (low-rank change under a law of c
and ū) whose true model's own free rollout passes the bar (the chaotic Lorenz sessions do not); it takes the worst
unseen schedule, since a schedule that leaves the connectivity where training ended cannot tell plasticity from none.
The no-plasticity models and the black-box GRU are learned: a claim that uses them as its control or as the
baselines it beats checks their competence in the same run, on the training sessions each was fitted on
(``train_fit_share``: the share of a reference's excess error over the truth's that they remove; 1 the truth, 0 the
reference: one static connectivity for the GRU, no connectivity for one session's fit; and, for the held-out claim,
its own measure on those sessions, ``r2_recurrent_fitted``).
The other controls are analytic: a permutation of the sessions, rotated schedules, the law with its stimulation
terms zeroed, none retrained. The headline is ``rule_recovered``: the paper's title, inferring the plasticity rule.
"""

from __future__ import annotations

import math

import numpy as np
import xarray as xr

from lab.claims import Claim, Competence, over_seeds
from lab.methods.steer.fitted import BASELINES

__all__ = ["CLAIMS", "HELDOUT_R2", "rule_error"]

#: the lab's bound on held-out R² (here: of the recurrent part of a free rollout)
HELDOUT_R2 = 0.9


def _scope(ds: xr.Dataset, within: bool | None, need: str | None = None) -> list[str]:
    names = [str(b) for b, w in zip(ds.benchmark.values, ds.within_assumptions.values)
             if within is None or bool(w) == within]
    if need == "rule":
        names = [b for b in names if bool(np.isfinite(ds.xi_true.sel(benchmark=b)).any())]
    if need == "rollout":  # a free rollout can score a model only where the true model's own rollout passes
        names = [b for b in names if min(float(ds.r2_oracle.sel(benchmark=b)),
                                         float(ds.r2_oracle_recurrent.sel(benchmark=b))) > HELDOUT_R2]
    if not names:
        raise ValueError("no benchmark of this run is in the claim's scope")
    return names


def _worst(vals: dict[str, float], low_is_bad: bool = True) -> str:
    key = (lambda k: -np.inf if not np.isfinite(vals[k]) else vals[k]) if low_is_bad else \
        (lambda k: np.inf if not np.isfinite(vals[k]) else vals[k])
    return min(vals, key=key) if low_is_bad else max(vals, key=key)


def _schedules(ds: xr.Dataset, b: str, model: str | None) -> dict[str, float]:
    """R² of the recurrent part of held-out sessions, each unseen schedule apart (model None: the true model)."""
    var = ds.r2_oracle_recurrent_schedule if model is None else ds.r2_recurrent_schedule.sel(model=model)
    return {str(s): float(var.sel(benchmark=b, schedule=s)) for s in ds.schedule.values}


def _worst_text(vals: dict[str, float]) -> str:
    worst = _worst(vals)
    return f"{vals[worst]:.3f} ({worst})"


def _heldout(ds: xr.Dataset):
    """STEER's held-out R² (recurrent part, free rollout), worst unseen schedule, worst benchmark within the
    assumptions whose true model's own rollout passes; the out-of-scope benchmarks named with the reason."""
    names = _scope(ds, True, need="rollout")
    per = {b: _schedules(ds, b, "steer") for b in names}
    vals = {b: min(v.values()) for b, v in per.items()}
    text = "; ".join(f"{b}: " + ", ".join(f"{s} {v:.3f}" for s, v in per[b].items())
                     + f" (pooled {float(ds.r2_recurrent.sel(benchmark=b, model='steer')):.3f}, true model's worst "
                     f"{_worst_text(_schedules(ds, b, None))})" for b in names)
    out = [str(b) for b in ds.benchmark.values if str(b) not in names]
    reasons = {b: "off the low-rank assumption, its own row heldout_r2_off_assumption"
               if not bool(ds.within_assumptions.sel(benchmark=b)) else
               f"the true model's own free rollout fails, activity R² {float(ds.r2_oracle.sel(benchmark=b)):.2f}"
               for b in out}
    return min(vals.values()), text + ("; out of scope: " + "; ".join(f"{b} ({r})" for b, r in reasons.items())
                                       if out else "")


def _heldout_static(ds: xr.Dataset):
    """The claim's measure on each no-plasticity model (c frozen at the first, or carried forward from the last
    training session): its worst schedule; the better of the two models per benchmark, and its best benchmark (each
    control must fail on every benchmark in the claim's scope)."""
    names = _scope(ds, True, need="rollout")
    both = {b: {m: _schedules(ds, b, m) for m in NO_PLASTICITY} for b in names}
    vals = {b: max(min(both[b][m].values()) for m in NO_PLASTICITY) for b in names}
    best = max(vals, key=vals.get)
    return vals[best], "; ".join(f"{b}: " + ", ".join(f"{m} worst {_worst_text(both[b][m])}" for m in NO_PLASTICITY)
                                 for b in names) + f" (best benchmark: {best})"


def _heldout_off(ds: xr.Dataset):
    """As :func:`_heldout` off the assumptions (bcm_network), with the true model's and the baselines' values."""
    names = _scope(ds, False)
    vals, notes = {}, []
    for b in names:
        per = _schedules(ds, b, "steer")
        vals[b] = min(per.values())
        others = ", ".join(f"{m} {float(ds.r2_recurrent.sel(benchmark=b, model=m)):.3f}" for m in BASELINES)
        notes.append(f"{b}: STEER worst {_worst_text(per)} (pooled "
                     f"{float(ds.r2_recurrent.sel(benchmark=b, model='steer')):.3f}); true model worst "
                     f"{_worst_text(_schedules(ds, b, None))} (pooled "
                     f"{float(ds.r2_oracle_recurrent.sel(benchmark=b)):.4f}); pooled {others}")
    return min(vals.values()), "full-rank plastic synapses, outside the model's rank-R change: " + "; ".join(notes)


def _rollout_fit(models: tuple[str, ...]):
    """Competence in the held-out measure: each model's free-rollout R² (recurrent part) on the training sessions
    it was fitted on, worst model and benchmark in the claim's scope."""
    def measure(ds: xr.Dataset):
        names = _scope(ds, True, need="rollout")
        vals = {(b, m): float(ds.r2_recurrent_fitted.sel(benchmark=b, model=m)) for b in names for m in models}
        worst = _worst(vals)
        return vals[worst], "; ".join(f"{b} {m}: {v:.3f}" for (b, m), v in vals.items())
    return measure


#: the competence bar of a learned baseline (train_fit_share): halfway from a static connectivity to the truth
FIT_SHARE = 0.5
FIT_SHARE_SOURCE = ("our convention: at least halfway from the reference (0: one static connectivity for every "
                    "session, where the GRU starts; no connectivity for frozen and free, one session's fit) to the "
                    "true connectivity (1), on the sessions the model was fitted on")


def _fit_share(models: tuple[str, ...], within: bool | None, need: str | None = None):
    def measure(ds: xr.Dataset):
        names = _scope(ds, within, need)
        vals = {(b, m): float(ds.train_fit_share.sel(benchmark=b, model=m)) for b in names for m in models}
        worst = _worst(vals)
        return vals[worst], ("; ".join(f"{b} {m}: {v:.3f}" for (b, m), v in vals.items())
                             + f" (worst: {worst[1]} on {worst[0]})")
    return measure


def _fit_share_seeds(models: tuple[str, ...]):
    def measure(ds: xr.Dataset):
        share = ds.train_fit_share_seeds.sel(benchmark=_scope(ds, False), model=list(models))
        per_seed = share.min(("benchmark", "model")).values
        return over_seeds(per_seed, "min", f"worst of {', '.join(models)} per seed: "
                          + ", ".join(f"{v:.3f}" for v in per_seed))
    return measure


def _rule_on(var: str):
    def measure(ds: xr.Dataset):
        names = _scope(ds, None, need="rule")
        vals = {}
        for b in names:
            sub = ds.sel(benchmark=b)
            keep = np.isfinite(sub.xi_true.values).all(axis=1)
            vals[b] = rule_error(sub[var].values[keep], sub.xi_true.values[keep])
        worst = max(vals, key=vals.get)
        text = "; ".join(f"{b}: {v:.3f}" for b, v in vals.items())
        if var == "xi_inferred":
            text += f"; inferred at {worst}: {ds.attrs.get(f'equation_inferred_{worst}', '?')}"
        return vals[worst], text
    return measure


def rule_error(xi_hat: np.ndarray, xi_true: np.ndarray) -> float:
    """Worst relative coefficient error: |ξ̂ - ξ| / |ξ| over true terms; a spurious term counts as |ξ̂| over the
    smallest true |ξ| of its component."""
    worst = 0.0
    for est, true in zip(np.atleast_2d(xi_hat), np.atleast_2d(xi_true)):
        on = (true != 0) & np.isfinite(true)
        if not on.any():
            continue
        worst = max(worst, float(np.max(np.abs(est[on] - true[on]) / np.abs(true[on]))))
        if (~on).any():
            worst = max(worst, float(np.max(np.abs(est[~on])) / np.min(np.abs(true[on]))))
    return worst



def _rollout_r(var: str, model: str | None):
    def measure(ds: xr.Dataset):
        names = _scope(ds, True)
        data = ds[var] if model is None else ds[var].sel(model=model)
        vals = {b: float(data.sel(benchmark=b)) for b in names}
        worst = _worst(vals)
        return vals[worst], "; ".join(f"{b}: {v:.3f}" for b, v in vals.items())
    return measure


def _ratio_over_baselines(within: bool, reference: str):
    """min over the other models of (their error / the reference's error), worst benchmark."""
    def measure(ds: xr.Dataset):
        names = _scope(ds, within)
        vals, notes = {}, []
        for b in names:
            err = ds.conn_error.sel(benchmark=b)
            ratios = {m: float(err.sel(model=m) / err.sel(model=reference)) for m in BASELINES if m != reference}
            vals[b] = min(ratios.values())
            notes.append(f"{b}: " + ", ".join(f"{m} {r:.2f}x" for m, r in ratios.items()))
        worst = min(vals, key=vals.get)
        return vals[worst], f"baseline error / {reference} error: " + "; ".join(notes)
    return measure


def _off_assumption_seeds(ds: xr.Dataset):
    """Off the assumptions, per seed: the best baseline's connectivity error over STEER's (> 1: STEER ahead); the
    mean over seeds, each baseline's ratio per seed, and how many seeds would separate the mean from 1."""
    names = _scope(ds, False)
    err = ds.conn_error_seeds.sel(benchmark=names)
    ratios = err.sel(model=list(BASELINES)) / err.sel(model="steer")  # (benchmark, run_seed, model)
    per_seed = ratios.min("model").min("benchmark").values
    mean, sd, n = float(per_seed.mean()), float(per_seed.std(ddof=1)) if len(per_seed) > 1 else math.nan, \
        len(per_seed)
    needed = math.ceil((2 * sd / abs(mean - 1)) ** 2) if np.isfinite(sd) and mean != 1 else math.nan
    seeds = ds.run_seed.values
    text = "; ".join(f"seed {int(s)}: " + ", ".join(f"{m} {float(ratios.sel(run_seed=s, model=m).min()):.2f}x"
                                                     for m in BASELINES) for s in seeds)
    return over_seeds(per_seed, "mean", f"best baseline's error / STEER's, worst of {', '.join(names)}: "
                      + ", ".join(f"{v:.3f}" for v in per_seed) + f" (STEER ahead on {int((per_seed > 1).sum())} of "
                      f"{n} seeds; mean {mean:.3f}, sd {sd:.3f}: separating the mean from 1 by two standard errors "
                      f"would take about {needed} seeds); per baseline: {text}")


def _designed(blind: bool):
    def measure(ds: xr.Dataset):
        names = _scope(ds, True)
        vals, notes = {}, []
        for b in names:
            d = ds.design_distance.sel(benchmark=b).mean("target")
            best_other = min(float(d.sel(protocol="random")), float(d.sel(protocol="constant")))
            mine = float(ds.design_distance_blind.sel(benchmark=b).mean("target")) if blind else \
                float(d.sel(protocol="designed"))
            vals[b] = best_other / mine
            notes.append(f"{b}: {'blind design' if blind else 'designed'} {mine:.3g}, random "
                         f"{float(d.sel(protocol='random')):.3g}, "
                         f"best constant {float(d.sel(protocol='constant')):.3g}")
        worst = min(vals, key=vals.get)
        return vals[worst], "mean distance to target: " + "; ".join(notes)
    return measure


def _joint_vs_two_stage(ds: xr.Dataset):
    """Connectivity error under unseen schedules, two-stage over joint (> 1: the coupling helps), worst benchmark
    within the assumptions; the rule errors of both fits in the detail."""
    names = _scope(ds, True)
    vals, notes = {}, []
    for b in names:
        sub = ds.sel(benchmark=b)
        vals[b] = float(sub.conn_error_two_stage / sub.conn_error.sel(model="steer"))
        keep = np.isfinite(sub.xi_true.values).all(axis=1)
        joint, two = (rule_error(sub[v].values[keep], sub.xi_true.values[keep])
                      for v in ("xi_inferred", "xi_two_stage"))
        notes.append(f"{b}: error ratio {vals[b]:.3f}, rule error joint {joint:.3f} / two-stage {two:.3f}")
    worst = min(vals, key=vals.get)
    return vals[worst], f"lambda_cons = {ds.attrs.get('lambda_cons', '?')}, lambda_smooth = " \
        f"{ds.attrs.get('lambda_smooth', '?')}: " + "; ".join(notes)


FROZEN = "the no-plasticity model: c frozen at the first training session's value"
#: the no-plasticity models (MODELS): c frozen at the first, or at the last, training session's value
NO_PLASTICITY = ("frozen", "free")
BASELINE_COMPETENCE = dict(op=">", threshold=FIT_SHARE, threshold_source=FIT_SHARE_SOURCE, unit="share")

CLAIMS = [
    Claim(
        name="heldout_r2",
        statement="Held-out sessions (never seen by the fit, c predicted by the learned law, not refitted) are "
                  "reproduced by a free rollout over the whole session under every unseen schedule: R² of their "
                  "recurrent part, on the benchmarks within the model's assumptions",
        source="paper: within-session R² as the fit metric (abstract; benchmarks); the lab's check",
        measure=_heldout,
        op=">=",
        threshold=HELDOUT_R2,
        threshold_source="the lab's bar: held-out R² >= 0.9 (worst unseen schedule, worst benchmark), applied to "
                         "the recurrent part 1 - SSE / SSE(W = 0): the inputs alone explain ~95% of the activity "
                         "variance",
        control=_heldout_static,
        control_label="no plasticity: c frozen at the first training session's value, or carried forward from "
                      "the last (the held-out sessions continue from it), the better of the two; its best benchmark, "
                      "so that each must fail on every one",
        competence=(
            Competence("no-plasticity models (frozen, carried forward) on the training session their c was fitted "
                       "on", _fit_share(NO_PLASTICITY, True, need="rollout"), **BASELINE_COMPETENCE),
            Competence("no-plasticity models (frozen, carried forward): the claim's own measure, free-rollout R² "
                       "(recurrent part) of the training session their c was fitted on", _rollout_fit(NO_PLASTICITY),
                       op=">=", threshold=HELDOUT_R2, threshold_source="the claim's bar, in distribution: each "
                       "control reproduces the session it was fitted on as the claim asks STEER to reproduce "
                       "unseen ones"),
        ),
    ),
    Claim(
        name="heldout_r2_off_assumption",
        statement="Report row: the held-out R² of heldout_r2 on the full-rank BCM network, outside the model's "
                  "low-rank assumption, against the true model's",
        source="paper: BCM-based network benchmark; the lab's check",
        measure=_heldout_off,
        op=">=",
        threshold=HELDOUT_R2,
        threshold_source="heldout_r2's bar, for reference: no claim is made off the assumptions",
        report=True,
    ),
    Claim(
        name="rule_recovered",
        statement="STEER recovers interpretable update equations: the library coefficients of the true rule",
        source="paper abstract ('recovers interpretable update equations'); Lorenz and BCM benchmarks",
        measure=_rule_on("xi_inferred"),
        op="<=",
        threshold=0.2,
        threshold_source="the lab's bar: library coefficients within ±20% of truth after factor alignment "
                         "(worst term, spurious terms relative to the smallest true one)",
        control=_rule_on("xi_shuffled"),
        control_label="the same regression on the inferred coefficients in shuffled session order",
        control_analytic="a permutation of STEER's own inferred coefficients (seeded apart from the fit): nothing is "
                         "trained for the control",
        headline=True,
    ),
    Claim(
        name="rollout_r",
        statement="Predicted adaptation under unseen schedules follows the true change of the coefficients",
        source="paper abstract ('predicts network adaptation under unseen stimulation schedules')",
        measure=_rollout_r("rollout_r", "steer"),
        op=">=",
        threshold=0.9,
        threshold_source="the lab's bar: predicted c_k rollout Pearson r >= 0.9 (worst benchmark within the "
                         "model's assumptions)",
        control=_rollout_r("rollout_r_wrong_schedule", None),
        control_label="STEER's law driven by the wrong schedules (test schedules rotated)",
        control_analytic="STEER's own law with its inputs rotated among the test schedules: nothing is trained for "
                         "the control",
    ),
    Claim(
        name="beats_baselines",
        statement="STEER predicts the connectivity under unseen schedules better than every baseline (frozen, "
                  "free per-session c carried forward, black-box GRU with STEER's optimiser budget)",
        source="paper abstract; the lab's bar: 'beats frozen-c baseline'",
        measure=_ratio_over_baselines(True, "steer"),
        op=">",
        threshold=1.0,
        threshold_source="qualitative claim: any improvement (ratio of the best baseline's error to STEER's > 1)",
        control=_ratio_over_baselines(True, "frozen"),
        control_label="the same comparison with " + FROZEN + " in STEER's place",
        competence=Competence("the baselines (frozen, free, black-box GRU) on the training sessions they were "
                              "fitted on", _fit_share(BASELINES, True), **BASELINE_COMPETENCE),
    ),
    Claim(
        name="designed_protocol",
        statement="A schedule designed with the learned law drives the true system closer to a target than random "
                  "or constant schedules",
        source="paper abstract ('supports the design of improved intervention protocols')",
        measure=_designed(False),
        op=">",
        threshold=1.0,
        threshold_source="qualitative claim: the better of random (median) and best constant over designed > 1",
        control=_designed(True),
        control_label="a schedule designed with the learned law blind to the stimulation (ū and c·ū dropped)",
        control_analytic="STEER's own law with its stimulation terms zeroed, nothing retrained; the random and "
                         "constant schedules are drawn, not learned (the best constant chosen on the true system)",
    ),
    Claim(
        name="off_assumption_bcm",
        statement="Report row: on a full-rank BCM network (off the low-rank assumption), the best baseline's "
                  "connectivity error under unseen schedules over STEER's, mean over seeds (> 1: STEER ahead)",
        source="paper: BCM-based network benchmark (against MD-SSM there; here frozen, carried forward, GRU)",
        measure=_off_assumption_seeds,
        op=">",
        threshold=1.0,
        threshold_source="qualitative comparison, as beats_baselines; a report row: its margin is within seed "
                         "noise at the seeds a run affords (the detail says how many would separate it)",
        competence=Competence("the baselines (frozen, free, black-box GRU) on the training sessions they were "
                              "fitted on, worst seed", _fit_share_seeds(BASELINES), **BASELINE_COMPETENCE),
        report=True,
    ),
    Claim(
        name="joint_vs_two_stage",
        statement="Ablation: the joint loss (slow-law coupling lambda_cons, lambda_smooth) against the two-stage "
                  "fit (reconstruction alone, then the law): connectivity error two-stage / joint",
        source="paper: the joint objective (method section); issue 10's ablation",
        measure=_joint_vs_two_stage,
        op=">",
        threshold=1.0,
        threshold_source="either way: > 1 would mean the coupling helps",
        report=True,
    ),
]
