"""Pruning dashboard: prune a trained LRU or S5 classifier by AIRE or a baseline score and see what is left.

The model is the ``aire_prune`` method's (its ``quick`` profile, seed 0): weights come from the method's cache
(``data/aire_prune/``); on first use the model is trained in a background thread with a progress bar, and the
accuracy-against-ratio sweep of every score is computed once. The environment variable
``LAB_PRUNING_DASHBOARD_PROFILE=ci`` switches to the tiny ``ci`` model (the browser tests do).
"""

from __future__ import annotations

import os
import threading

import numpy as np
import panel as pn
import param

from dashboards._layout import BackgroundJob, dashboard_layout
from lab.core.train import torch_threads
from lab.methods.aire_prune import experiment
from lab.methods.aire_prune import model as P
from lab.methods.aire_prune.config import KINDS, SCORES, Config
from lab.viz import aire_prune as viz

TITLE = "Pruning: AIRE-Prune on a trained state space model"
PROFILE_ENV = "LAB_PRUNING_DASHBOARD_PROFILE"
PROFILES = ("quick", "ci")
#: ratios of the accuracy sweep shown as curves
SWEEP_RATIOS = tuple(round(0.1 * k, 2) for k in range(10)) + (0.95,)
IMPULSE_LAGS = 64

_LOCK = threading.Lock()
_READY: dict[tuple[str, str], dict] = {}  # (profile, kind) -> {"model", "task", "sweep", "full"}


def _default_profile() -> str:
    value = os.environ.get(PROFILE_ENV, "quick")
    if value not in PROFILES:
        raise ValueError(f"{PROFILE_ENV}={value!r} is not allowed; allowed: {', '.join(PROFILES)}")
    return value


def _config(profile: str) -> Config:
    return Config.from_profile(profile)


def prepare(profile: str, kind: str, callback=None) -> dict:
    """Load (or train) the model and compute its sweep; cached in memory per (profile, kind)."""
    key = (profile, kind)
    with _LOCK:
        if key in _READY:
            return _READY[key]
    cfg = _config(profile)
    task = experiment.load_task(cfg)
    with torch_threads(cfg.threads):
        model, _ = experiment.trained_model(cfg, kind, cfg.seed, task, progress=False, callback=callback)
        sweep = experiment.accuracy_curves(model, cfg, task, SWEEP_RATIOS, SCORES, seed=cfg.seed)
    entry = {"model": model, "task": task, "sweep": sweep, "full": float(sweep.accuracy.sel(ratio=0.0).max()),
             "cfg": cfg}
    with _LOCK:
        _READY[key] = entry
    return entry


@pn.cache(max_items=256)
def _pruned(profile: str, kind: str, score: str, ratio: float):
    entry = _READY[(profile, kind)]
    rng = np.random.default_rng([entry["cfg"].seed, int(round(ratio * 1000))])
    keep = P.plan(entry["model"], score, ratio, rng)
    pruned = P.prune(entry["model"], keep)
    with torch_threads(entry["cfg"].threads):
        acc = experiment.accuracy_on_test(pruned, entry["task"])
    return pruned, keep, acc


class PruningDashboard(pn.viewable.Viewer):
    """Pick a model and a score, slide the pruning ratio; see accuracy, states kept and impulse responses."""

    kind = param.Selector(default="lru", objects=list(KINDS), doc="SSM layer of the trained classifier.")
    score = param.Selector(default="aire", objects=list(SCORES), doc="Pruning score.")
    ratio = param.Number(default=0.5, bounds=(0.0, 0.95), step=0.05, doc="Share of all states removed.")
    layer = param.Integer(default=0, bounds=(0, 3), doc="Layer whose impulse response is shown.")
    profile = param.Selector(default="quick", objects=list(PROFILES),
                             doc="Method profile whose model is used (ci: tiny, for tests).")
    version = param.Integer(default=0, precedence=-1, doc="Bumped when a model becomes available.")

    def __init__(self, **params):
        params.setdefault("profile", _default_profile())
        super().__init__(**params)
        self._job = BackgroundJob()
        self._prepare()

    def ready(self) -> bool:
        return (self.profile, self.kind) in _READY and not self._job.running

    @param.depends("kind", "profile", watch=True)
    def _prepare(self):
        cfg = _config(self.profile)
        self.param.layer.bounds = (0, cfg.n_layers - 1)
        self.layer = min(self.layer, cfg.n_layers - 1)
        if self._job.running:
            return  # one preparation at a time; it calls _prepare again when it ends
        if (self.profile, self.kind) in _READY:
            self._job.clear()
            self.version += 1
            return
        profile, kind = self.profile, self.kind
        self._job.start(
            lambda report: prepare(profile, kind, lambda step, total: report(step, total=total)),
            total=1,
            message=(f"**Preparing the {kind.upper()} model** (first use: training if it is not cached, then the "
                     "accuracy sweep)..."),
            describe=lambda info: (f"**Training** step {int(info['done'])} / {int(info['total'])} (first use; "
                                   "cached afterwards), then the accuracy sweep..."),
            on_done=self._prepare,
            name=f"pruning-{profile}-{kind}",
        )

    # -- views ----------------------------------------------------------------------------------------------------
    def _current(self):
        return _pruned(self.profile, self.kind, self.score, round(float(self.ratio), 4))

    def _placeholder(self):
        return pn.pane.Markdown("*waiting for the model...*")

    @param.depends("kind", "score", "ratio", "profile", "version")
    def summary(self):
        if not self.ready():
            return self._placeholder()
        entry = _READY[(self.profile, self.kind)]
        pruned, keep, acc = self._current()
        ssm0, all0 = P.macs_per_token(entry["model"])
        ssm, total = P.macs_per_token(pruned)
        n0 = sum(layer.d_state for layer in P.diagonal_layers(entry["model"]))
        return pn.pane.Markdown(
            f"**{self.kind.upper()}, {viz._style(self.score)['label']}, ratio {self.ratio:.2f}**: "
            f"{sum(len(k) for k in keep)} of {n0} states kept, test accuracy **{acc:.1f}%** "
            f"(unpruned {entry['full']:.1f}%, no retraining). SSM multiply-adds per step {ssm:,} of {ssm0:,} "
            f"({1 - ssm / ssm0:.0%} saved; whole model {1 - total / all0:.0%}).",
            sizing_mode="stretch_width",
        )

    @param.depends("kind", "score", "ratio", "profile", "version")
    def curves(self):
        if not self.ready():
            return self._placeholder()
        entry = _READY[(self.profile, self.kind)]
        return pn.pane.HoloViews(viz.sweep_curves(entry["sweep"], entry["full"], float(self.ratio), self.score,
                                                  self.kind))

    @param.depends("kind", "score", "ratio", "profile", "version")
    def kept(self):
        if not self.ready():
            return self._placeholder()
        entry = _READY[(self.profile, self.kind)]
        _, keep, _ = self._current()
        sizes = [layer.d_state for layer in P.diagonal_layers(entry["model"])]
        return pn.pane.HoloViews(viz.kept_bars([len(k) for k in keep], sizes, self.score, float(self.ratio)))

    @param.depends("kind", "score", "ratio", "layer", "profile", "version")
    def impulse(self):
        if not self.ready():
            return self._placeholder()
        entry = _READY[(self.profile, self.kind)]
        pruned, _, _ = self._current()
        k = min(self.layer, len(P.diagonal_layers(pruned)) - 1)
        before = P.diagonal_layers(entry["model"])[k].impulse_response(IMPULSE_LAGS)
        after = P.diagonal_layers(pruned)[k].impulse_response(IMPULSE_LAGS)
        layout = viz.impulse_before_after(before, after, k)
        return pn.Row(*[pn.pane.HoloViews(plot) for plot in layout])

    def __panel__(self):
        widgets = pn.Param(
            self.param,
            parameters=["kind", "score", "ratio", "layer", "profile"],
            widgets={
                "kind": pn.widgets.RadioButtonGroup,
                "ratio": {"type": pn.widgets.FloatSlider, "css_classes": ["pruning-ratio"], "format": "0.00"},
                "layer": {"type": pn.widgets.IntSlider},
                "profile": pn.widgets.RadioButtonGroup,
            },
            show_name=False,
        )
        intro = pn.pane.Markdown(
            "### AIRE-Prune\nEach state of a diagonal SSM layer contributes the impulse-response energy "
            "E = ||C_i||² ||B̄_i||² / (1 − |λ_i|²) over an infinite horizon. Normalised per layer by tail sums, "
            "the global top-K decides which states stay; nothing is retrained.\n\nPaper: arXiv:2602.00534."
        )
        main = [self._job.status, self._job.progress, self.summary, pn.Row(self.curves, self.kept), self.impulse]
        return dashboard_layout("Pruning: AIRE-Prune on a trained SSM", sidebar=[intro, widgets], main=main)


Dashboard = PruningDashboard


def app():
    return PruningDashboard().__panel__()


if __name__.startswith("bokeh"):
    app().servable()
