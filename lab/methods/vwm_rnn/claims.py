"""The VWM behaviour-fitting RNN's claims, each read from the run's Dataset alone.

Every claim is measured per seed on the same evaluation trials and states its statistic (the mean over seeds; the
table shows the spread). The control of every claim is the same measurement on the same RNN trained by MSE (the
paper's failing baseline): a learned control, so each claim checks its competence in the same run, how much of the
behaviour's mean (what MSE training aims at) its output captures (:data:`MSE_COMPETENCE`). An untrained RNN is no
control: it has learned nothing, so its failing proves nothing.

The headline is ``multimodal``: responses at the non-target colour's mode, beyond the mass that uniform responses
put there, which a network that averages the colours cannot have.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from lab.claims import Claim, Competence, Measurement, Pick, over_seeds, value
from lab.methods.vwm_rnn.model import wrap

#: the multimodality check uses close trials whose two colours are at least this far apart, so that the modes at
#: the target and at the non-target are well separated from their midpoint
MIN_SEPARATION = 2 * np.pi / 3


def mixture(ds: xr.Dataset, model: str, param: str, subset: str = "all") -> np.ndarray:
    """Per seed: one parameter of the Bays mixture fitted to ``model``'s responses on ``subset``."""
    return ds.mixture.sel(model=model, param=param, subset=subset).values


def _mode_trials(ds: xr.Dataset, subset: str = "close") -> tuple[np.ndarray, np.ndarray]:
    """The ``subset`` (close or far) trials whose colours are at least :data:`MIN_SEPARATION` apart: (mask over
    trials, the colours' separation on them)."""
    sep = np.abs(wrap(ds.nontarget.values - ds.target.values))
    dist = ds.distance.values
    where = dist < float(ds.attrs["close"]) if subset == "close" else dist > float(ds.attrs["far"])
    keep = where & (sep >= MIN_SEPARATION)
    if keep.sum() < 5:
        raise ValueError(f"only {int(keep.sum())} {subset} trials with separated colours; raise n_eval")
    return keep, sep[keep]


def swap_mode_mass(ds: xr.Dataset, model: str, subset: str = "close") -> np.ndarray:
    """Per seed: among ``subset`` (close or far) trials whose colours are at least :data:`MIN_SEPARATION` apart, the
    share of responses within a quarter of the colours' separation of the non-target colour (its mode).

    A network that averages the two colours answers near their midpoint (half the separation from each) and puts
    next to nothing there; one that swaps puts its swap rate there; uniform responses put
    :func:`uniform_mode_mass` there."""
    keep, sep = _mode_trials(ds, subset)
    resp = ds.response.sel(model=model).values[:, keep]  # (seed, trial)
    near = np.abs(wrap(resp - ds.nontarget.values[keep])) < sep / 4
    return near.mean(axis=1)


def uniform_mode_mass(ds: xr.Dataset) -> float:
    """The share of uniform responses that :func:`swap_mode_mass` counts: its window, half the colours'
    separation wide, over the circle, averaged over the same trials (1/6 to 1/4)."""
    _, sep = _mode_trials(ds)
    return float(np.mean(sep / (4 * np.pi)))


def _multimodal(model: str):
    def measure(ds: xr.Dataset) -> Measurement:
        v, chance = swap_mode_mass(ds, model), uniform_mode_mass(ds)
        gen = float(swap_mode_mass(ds, "generator").mean())
        return over_seeds(v - chance, "mean", f"{model}: {np.mean(v):.3f} of responses at the non-target's mode on "
                                              f"close trials, uniform responses {chance:.3f} (the generator's "
                                              f"draws {gen:.3f})")

    return measure


#: the bar of the MSE-trained control's competence (:func:`mse_skill`)
MSE_SKILL = 0.5


def mse_skill(ds: xr.Dataset) -> Measurement:
    """Per seed: how much of the behaviour's mean the MSE-trained RNN's output captures (``mse_mean_skill``); the
    worst seed."""
    v = ds.mse_mean_skill.values
    return over_seeds(v, "min", f"1 - Σ||x - m||² / Σ||m||² per seed: {', '.join(f'{x:.3f}' for x in v)} (an "
                                f"output of 0: 0; reporting the cued colour exactly: "
                                f"{float(ds.attrs['cued_colour_mean_skill']):.3f})")


MSE_COMPETENCE = Competence(
    label="MSE-trained RNN: its output against the behaviour's mean (what MSE training aims at), worst seed",
    measure=mse_skill,
    op=">",
    threshold=MSE_SKILL,
    threshold_source="our convention: at least halfway from an output of 0 (skill 0) to the behaviour's mean "
                     "(skill 1); reporting the cued colour exactly scores about 0.8 (see the detail)",
    unit="skill",
)
MSE_CONTROL = "the same RNN trained by MSE"


def _swap_gap(model: str):
    def measure(ds: xr.Dataset) -> Measurement:
        w, g = mixture(ds, model, "w_nt"), mixture(ds, "generator", "w_nt")
        return over_seeds(np.abs(w - g), "mean", f"w_NT {model} {np.mean(w):.3f} vs the generator's draws "
                                                 f"{np.mean(g):.3f} (true mean swap probability "
                                                 f"{ds.attrs['generator_swap_rate']:.3f})")

    return measure


def _precision(model: str):
    """Per seed: the mixture's κ fitted to ``model``'s responses over the generator's κ on the same trials (all
    trials), with the far trials' ratio in the detail."""

    def measure(ds: xr.Dataset) -> Measurement:
        k, g = mixture(ds, model, "kappa"), mixture(ds, "generator", "kappa")
        kf, gf = mixture(ds, model, "kappa", "far"), mixture(ds, "generator", "kappa", "far")
        return over_seeds(k / g, "mean", f"κ {model} {np.mean(k):.3g} vs the generator's draws {np.mean(g):.3g} "
                                         f"(far trials {np.mean(kf):.3g} vs {np.mean(gf):.3g})")

    return measure


_PARAM_TEXT = {"w_t": "w_T", "w_nt": "w_NT", "w_u": "w_U", "kappa": "κ"}


def _w(model: str, param: str, subset: str = "all") -> Pick:
    """One parameter of the mixture fitted to ``model``'s responses on ``subset``, per seed."""
    where = "" if subset == "all" else f" {subset}"
    return Pick("mixture", f"{_PARAM_TEXT.get(param, param)}{where}",
                sel={"model": model, "param": param, "subset": subset})


def _distance(model: str):
    """Per seed: the share of responses at the non-target's mode (:func:`swap_mode_mass`) on close trials minus the
    larger of that share on far trials and of uniform responses' share, with the generator's draws as reference.

    On colours at least :data:`MIN_SEPARATION` apart a network that averages the colours answers between them and
    puts next to nothing at the non-target (the mixture's w_NT, fitted with one shared κ, reads such averaged
    responses as swaps); a network that only grows imprecise on close trials reaches the uniform level at most."""

    def measure(ds: xr.Dataset) -> Measurement:
        c, f, u = swap_mode_mass(ds, model, "close"), swap_mode_mass(ds, model, "far"), uniform_mode_mass(ds)
        g = swap_mode_mass(ds, "generator", "close") - swap_mode_mass(ds, "generator", "far")
        wc, wf = mixture(ds, model, "w_nt", "close"), mixture(ds, model, "w_nt", "far")
        return over_seeds(c - np.maximum(f, u), "mean",
                          f"{model}: {np.mean(c):.3f} at the non-target's mode on close trials, {np.mean(f):.3f} on "
                          f"far ones, uniform responses {u:.3f} (the generator's draws: close minus far "
                          f"{np.mean(g):.3f}; mixture w_NT close {np.mean(wc):.3f}, far {np.mean(wf):.3f})")

    return measure


def _target(model: str):
    """w_T per seed, with the fit's κ and the generator's draws' w_T and κ as reference."""

    def reference(ds: xr.Dataset) -> str:
        return (f"κ {np.mean(mixture(ds, model, 'kappa')):.3g}; the generator's draws: w_T "
                f"{np.mean(mixture(ds, 'generator', 'w_t')):.3f}, κ {np.mean(mixture(ds, 'generator', 'kappa')):.3g}")

    return value(_w(model, "w_t"), what=model, note=reference)


CLAIMS = [
    Claim(
        name="multimodal",
        statement="The DDPM-trained RNN's responses are multimodal: a mode at the non-target colour on trials where "
                  "the items are close in location, beyond what uniform responses put there (mean over seeds)",
        source="paper's abstract and results: only the DDPM-trained RNN reproduces the swap errors; "
               "MSE-trained RNNs fail",
        measure=_multimodal("ddpm"),
        op=">=",
        threshold=0.1,
        threshold_source="our convention: a second mode holding at least 10% of the responses above the uniform "
                         "level (chance: uniform responses put 1/6 to 1/4 there; the generator's draws: the "
                         "detail)",
        unit="of responses above uniform",
        control=_multimodal("mse"),
        control_label=MSE_CONTROL + ": it averages the colours, so its responses sit between them",
        competence=MSE_COMPETENCE,
        headline=True,
    ),
    Claim(
        name="swap_rate",
        statement="The DDPM-trained RNN's swap rate (mixture w_NT) is near the generator's (mean over seeds of "
                  "|w_NT - w_NT of the generator's draws|)",
        source="paper: the network is fitted to the behaviour; the lab's plan: within ±0.05",
        measure=_swap_gap("ddpm"),
        op="<",
        threshold=0.05,
        threshold_source="the lab's plan: w_NT within ±0.05 of the generator's swap rate",
        unit="|Δ w_NT|",
        control=_swap_gap("mse"),
        control_label=MSE_CONTROL,
        competence=MSE_COMPETENCE,
    ),
    Claim(
        name="distance_dependent_swaps",
        statement="The DDPM-trained RNN swaps more when the distractor is close to the cued item in location: "
                  "the share of responses at the non-target colour's mode on close trials minus the larger of that "
                  "share on far trials and of uniform responses, colours at least 120° apart (mean over seeds)",
        source="paper: only surrogate data with distance-dependent swaps reproduce the neural signatures; issue 15",
        measure=_distance("ddpm"),
        op=">=",
        threshold=0.1,
        threshold_source="the lab's plan: close minus far >= 0.1 (its bar for w_NT, here on the mode mass, which "
                         "an averaging network cannot fake)",
        unit="of responses",
        control=_distance("mse"),
        control_label=MSE_CONTROL + ": no distance-dependent swaps",
        competence=MSE_COMPETENCE,
    ),
    Claim(
        name="precision",
        statement="The DDPM-trained RNN's responses are as precise as the generator's: the mixture's κ over the "
                  "generator's κ on the same trials (mean over seeds)",
        source="paper: the network is fitted to the behaviour (its precision included); issue 39",
        measure=_precision("ddpm"),
        op=">=",
        threshold=0.5,
        threshold_source="our convention (issue 39 asks for a stated tolerance): κ within a factor 2 of "
                         "the generator's; a report row, no verdict: the MSE-trained RNN is precise where it does "
                         "not average (far trials), so no control lacks the property",
        unit="κ / κ of the generator",
        control=_precision("mse"),
        control_label=MSE_CONTROL + ": precise on far trials, its averages on close ones read as imprecision",
        competence=MSE_COMPETENCE,
        report=True,
    ),
    Claim(
        name="target_weight",
        statement="Most of the DDPM-trained RNN's responses go to the cued item: mixture w_T (mean over seeds)",
        source="Bays (2009) mixture on the fitted behaviour; the lab's plan",
        measure=_target("ddpm"),
        op=">=",
        threshold=0.5,
        threshold_source="the lab's plan: w_T >= 0.5; a report row, no verdict: no control lacks the property "
                         "(the MSE-trained RNN remembers the cued item too)",
        unit="w_T",
        control=_target("mse"),
        control_label=MSE_CONTROL + ": it remembers the cued item too, so w_T alone need not separate the two",
        competence=MSE_COMPETENCE,
        report=True,
    ),
]
