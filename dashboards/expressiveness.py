"""Expressiveness dashboard: what a recurrent state can represent. A formal language or task, a model class (a
hand-built construction or a trained one-layer SSM), a length and a precision: the state trajectory, the decision
on every prefix against the truth and where it first fails; and the prefix-scannable model's binary counter, chunk by
chunk, with its live states against log2 n."""

from __future__ import annotations

import panel as pn
import param

from dashboards.panels import MethodDashboard, MethodPanel, preparation, view
from lab.methods.psm import live as psm_live
from lab.methods.psm import plots as psm_plots
from lab.methods.ssm_ltl import live, plots

METHOD = ("ssm_ltl", "psm")
TITLE = "Expressiveness: temporal logic in SSMs, prefix-scannable models"
DESCRIPTION = "Formal languages decided by SSM states; a prefix scan's binary counter"

VIEW_PARAMS = ("language", "model", "length", "precision", "seed", "profile")


class LtlPanel(MethodPanel):
    """Choose a language, a model class, a length and a precision; see the states, the decisions and the first
    mistake."""

    method = "ssm_ltl"
    title = "Temporal logic in SSMs"
    intro = ("### What a recurrent state can hold\nh_t = gate(x_t) ⊙ h_{t-1} + inc(x_t): input-gated diagonal SSMs "
             "express pure-past temporal logic ('b since a'), time-invariant rotations count modulo m, a counter "
             "with A = 1 counts as far as its precision allows. Gates in (0, 1) cannot count parity, so they fail "
             "(aa)* as the word grows.")
    controls = ("language", "model", "length", "precision", "seed", "profile")
    widget_options = {"length": {"type": pn.widgets.IntSlider}}

    language = param.Selector(default="aa_star", objects=list(live.LANGUAGE_NAMES),
                              doc="Formal language (lab.datasets.languages).")
    model = param.Selector(default="lti_rotation", objects=["lti_rotation"],
                           doc="A hand-built construction, or a trained one-layer class (lti, gate01, gate11).")
    length = param.Integer(default=64, bounds=(1, 10_000), doc="Letters of the sampled word.")
    precision = param.Selector(default="float32", objects=["float32"],
                               doc="float32, or int8 (saturating fixed-width arithmetic, kernels.saturating_scan).")
    seed = param.Integer(default=0, bounds=(0, 1000), doc="The sampled word's seed (and the trained model's).")

    # -- choices that depend on the language and the model -----------------------------------------------------------
    @param.depends("language", "profile", watch=True, on_init=True)
    def _choices(self):
        models = list(live.models_for(self.language))
        self.param.model.objects = models
        if self.model not in models:
            self.model = models[0]
        self._precisions()

    @param.depends("model", watch=True)
    def _precisions(self):
        precisions = list(live.precisions_for(self.model, live.config(self.profile).modulus))
        self.param.precision.objects = precisions
        if self.precision not in precisions:
            self.precision = precisions[0]

    # -- preparation: trained models are trained on first use (then cached on disk) ----------------------------------
    @preparation(on=("profile", "language", "model", "seed"), label="the trained model",
                 cached=lambda s: not _trained(s) or live.trained.cached(s.language, s.model, s.seed, s.profile),
                 message="**Training** {model} on {language} (first use; cached on disk afterwards)...")
    def training(self, s, report) -> None:
        if _trained(s):
            live.trained(s.language, s.model, s.seed, s.profile)
        report(1)

    def result(self):
        return live.trajectory(self.language, self.model, self.length, self.precision, self.seed, self.profile)

    # one HoloViews element per pane: replacing a pane that holds an hv.Layout stalls the page's updates
    @view(*VIEW_PARAMS, needs="training")
    def summary(self):
        t = self.result()
        failed = "never fails" if t.first_failure is None else f"first fails at position **{t.first_failure}**"
        return pn.pane.Markdown(f"**{t.model}** ({t.source}, {t.precision}) on **{t.language}**, "
                                f"{len(t.tokens)} letters: {t.accuracy:.1%} of prefixes decided right; {failed}.")

    @view(*VIEW_PARAMS, needs="training")
    def states(self):
        return pn.pane.HoloViews(list(plots.trajectory(self.result()))[0])

    @view(*VIEW_PARAMS, needs="training")
    def decisions(self):
        return pn.pane.HoloViews(list(plots.trajectory(self.result()))[1])

    def main(self) -> list:
        return [self.summary, self.states, self.decisions]


def _trained(s) -> bool:
    """Whether the settings' model class is a trained one (the constructions need no training)."""
    return s.model in live.TRAINED_CLASSES and s.model in live.models_for(s.language)


class PsmPanel(MethodPanel):
    """The streaming prefix scan's binary counter, chunk by chunk."""

    method = "psm"
    title = "Prefix-scannable models"
    intro = ("### Prefix-scannable models\nStreaming inference keeps a binary counter of chunk aggregates: at most "
             "floor(log2 n) + 1 live states and O(1) aggregator calls per chunk, amortised.")
    controls = ("chunks",)
    widget_options = {"chunks": {"type": pn.widgets.IntSlider}}

    chunks = param.Integer(default=40, bounds=(1, 512), doc="Chunks pushed through the binary counter.")

    @view("chunks")
    def counter(self):
        return pn.pane.HoloViews(list(psm_plots.counter_trace(psm_live.counter_trace(self.chunks)))[0])

    @view("chunks")
    def stack(self):
        return pn.pane.HoloViews(list(psm_plots.counter_trace(psm_live.counter_trace(self.chunks)))[1])

    def main(self) -> list:
        return [self.counter, self.stack]


class Dashboard(MethodDashboard):
    """Temporal logic in SSMs over the prefix-scannable models' binary counter."""

    title = "Expressiveness: temporal logic in SSMs and prefix-scannable models"
    panel_types = (LtlPanel, PsmPanel)


def app():
    return Dashboard().__panel__()


if __name__.startswith("bokeh"):
    app().servable()
