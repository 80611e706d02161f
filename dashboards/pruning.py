"""Pruning dashboard: prune a trained LRU or S5 classifier by AIRE or a baseline score and see what is left.

The model is the ``aire_prune`` method's (the dashboards' profile, seed ``seed``): weights come from the method's
cache (``data/aire_prune/``); on first use the model is trained in a background preparation with a progress bar, and
the accuracy-against-ratio curves of every score are computed once (:mod:`lab.methods.aire_prune.live`).
``LAB_DASHBOARD_PROFILE=ci`` switches to the tiny ``ci`` model (the browser tests do).
"""

from __future__ import annotations

import panel as pn
import param

from dashboards.panels import MethodPanel, field_param, preparation, view
from lab.methods.aire_prune import live, plots
from lab.methods.aire_prune.config import KINDS, SCORES, Config

METHOD = "aire_prune"
TITLE = "Pruning: AIRE-Prune on a trained state space model"
DESCRIPTION = "AIRE-Prune a trained LRU/S5: accuracy, states kept and impulse responses by ratio"
VIEW_PARAMS = ("kind", "score", "ratio", "profile")


class Dashboard(MethodPanel):
    """Pick a model and a score, slide the pruning ratio; see accuracy, states kept and impulse responses."""

    method = METHOD
    title = "Pruning: AIRE-Prune on a trained SSM"
    intro = ("### AIRE-Prune\nEach state of a diagonal SSM layer contributes the impulse-response energy "
             "E = ||C_i||² ||B̄_i||² / (1 − |λ_i|²) over an infinite horizon. Normalised per layer by tail sums, "
             "the global top-K decides which states stay; nothing is retrained.")
    controls = ("kind", "score", "ratio", "layer", "profile")
    widget_options = {
        "kind": pn.widgets.RadioButtonGroup,
        "ratio": {"type": pn.widgets.FloatSlider, "css_classes": ["pruning-ratio"], "format": "0.00"},
        "layer": {"type": pn.widgets.IntSlider},
        "profile": pn.widgets.RadioButtonGroup,
    }

    kind = param.Selector(default="lru", objects=list(KINDS), label="SSM layer",
                          doc="SSM layer of the trained classifier.")
    score = param.Selector(default="aire", objects=list(SCORES), doc="Pruning score.")
    ratio = field_param(Config, "headline_ratio", default=0.5, bounds=(0.0, 0.95), step=0.05, label="Pruning ratio")
    layer = param.Integer(default=0, bounds=(0, 3), doc="Layer whose impulse response is shown.")

    @preparation(on=("profile", "kind"), label="the trained model",
                 cached=lambda s: live.curves.cached(Config.from_profile(s.profile), s.kind),
                 describe="**Training** step {done} / {total} (first use; cached afterwards), then the accuracy "
                          "sweep...")
    def model(self, s, report) -> None:
        live.prepare(self.config_of(s.profile), s.kind, report)

    @param.depends("profile", watch=True, on_init=True)
    def _layers(self):
        n = self.config.n_layers
        self.param.layer.bounds = (0, n - 1)
        self.layer = min(self.layer, n - 1)

    def _current(self) -> live.Pruned:
        return live.pruned(self.config, self.kind, self.score, round(float(self.ratio), 4))

    @view(*VIEW_PARAMS, needs="model")
    def summary(self):
        cfg = self.config
        cur = self._current()
        ssm0, all0 = live.unpruned_macs(cfg, self.kind)
        return pn.pane.Markdown(
            f"**{self.kind.upper()}, {plots.score_style(self.score)['label']}, ratio {self.ratio:.2f}**: "
            f"{sum(cur.kept)} of {sum(live.unpruned_state_sizes(cfg, self.kind))} states kept, test accuracy "
            f"**{cur.accuracy:.1f}%** (unpruned {live.curves(cfg, self.kind).attrs['accuracy_full']:.1f}%, no "
            f"retraining). SSM multiply-adds per step {cur.ssm_macs:,} of {ssm0:,} ({1 - cur.ssm_macs / ssm0:.0%} "
            f"saved; whole model {1 - cur.model_macs / all0:.0%}).",
            sizing_mode="stretch_width",
        )

    @view(*VIEW_PARAMS, needs="model")
    def curves(self):
        sweep = live.curves(self.config, self.kind)
        return pn.pane.HoloViews(plots.sweep_curves(sweep, sweep.attrs["accuracy_full"], float(self.ratio),
                                                    self.score, self.kind))

    @view(*VIEW_PARAMS, needs="model")
    def kept(self):
        sizes = live.unpruned_state_sizes(self.config, self.kind)
        return pn.pane.HoloViews(plots.kept_bars(self._current().kept, sizes, self.score, float(self.ratio)))

    @view(*VIEW_PARAMS, "layer", needs="model")
    def impulse(self):
        before, after = live.impulse_responses(self.config, self.kind, self.score, round(float(self.ratio), 4),
                                               self.layer)
        layout = plots.impulse_before_after(before, after, min(self.layer, self.config.n_layers - 1))
        return pn.Row(*[pn.pane.HoloViews(plot) for plot in layout])

    def main(self) -> list:
        return [self.summary, pn.Row(self.curves, self.kept), self.impulse]


def app():
    return Dashboard().__panel__()


if __name__.startswith("bokeh"):
    app().servable()
