"""Compact models dashboard: state-space models as small neural representations of a datum (SSM-INR: LPNet-S3K and
its baselines), and SSDi8's 8-bit quantisation of a Mamba-2 model.

The INR tab: pick a datum, an encoder and a parameter budget; see the original, the reconstruction, the error map, the
Laplacian pyramid's levels and PSNR against size for each encoder. The fits of the chosen datum (every encoder at
every budget of the profile) are prepared in the background and cached on disk. The SSDi8 tab: perplexity and SSD
output error per quantisation choice, and the histogram of an activation per axis, once the profile's model is
trained and quantised in the background.

The figures follow the widgets in place (DynamicMaps: their data change, the figures stay; issue 43): an encoder,
budget or frame changes the images' data; a datum or profile (other fits) draws them anew.
"""

from __future__ import annotations

import functools

import panel as pn
import param

from dashboards.forgetting import built_once, follow
from dashboards.panels import MethodDashboard, MethodPanel, preparation, view
from lab.methods.ssdi8 import live as qlive
from lab.methods.ssdi8 import plots as qplots
from lab.methods.ssm_inr import live, plots

METHOD = ("ssm_inr", "ssdi8")
TITLE = "Compact models: SSMs as neural representations (SSM-INR), 8-bit SSD quantisation (SSDi8)"
DESCRIPTION = "Images and video as small SSM representations; SSDi8's 8-bit quantisation of Mamba-2"

def _pane(obj) -> pn.pane.HoloViews:
    """A plot on its own axes: Panel links the axes of every plot in a document that share a dimension name by
    default, which drew a 32 x 32 pyramid level in a corner of the 64 x 64 original's range, and the activation
    histogram's ``x`` values on the images' 0-64 ``x`` axis."""
    return pn.pane.HoloViews(obj, linked_axes=False)


VIEW_PARAMS = ("datum", "encoder", "budget", "frame", "profile")
#: what the INR figures follow in place; a datum or profile (other fits) draws them anew
FOLLOWED = ("encoder", "budget", "frame")
QUANT_PARAMS = ("tensor", "axis", "index")


class InrPanel(MethodPanel):
    """Choose a datum, an encoder and a budget; see its representation and how each encoder scales."""

    method = METHOD[0]
    title = "INR"
    intro = ("### LPNet-S3K\nAn SSM over each L x L window keeps only its final state: one strided kernel "
             "K = [Ā^{L-1}B̄ … ĀB̄ B̄] compresses and downsamples (S3K). LPNet codes each level of a Laplacian "
             "pyramid with one; a light deconvolution decoder reconstructs. Every model has the chosen number of "
             "parameters (within 10%).")
    controls = ("datum", "encoder", "budget", "frame", "profile")

    datum = param.Selector(default="astronaut", objects=list(live.DATA), doc="The datum to represent.")
    encoder = param.Selector(default="lpnet_s3k", objects=list(live.SHOWN), doc="The model shown.")
    budget = param.Selector(
        default=3000, objects=[3000], doc="Numbers stored (latent + decoder; SIREN: its weights)."
    )
    frame = param.Integer(default=0, bounds=(0, 0), precedence=-1, doc="Frame of the video shown (videos only).")

    @preparation(on=("profile", "datum"), label="the fits", cached=lambda s: live.prepared(s.datum, s.profile),
                 message="**Fitting** every encoder to {datum} (first use; cached on disk afterwards)...",
                 describe="**Fitting** every encoder to {datum}: {done} / {total} (first use; cached on disk "
                          "afterwards)...")
    def fits(self, s, report) -> None:
        live.prepare(s.datum, s.profile, report=report)

    @param.depends("profile", "datum", watch=True, on_init=True)
    def _bounds(self):
        cfg = live.config(self.profile)
        self.param.budget.objects = list(cfg.rd_budgets)
        if self.budget not in cfg.rd_budgets:
            self.budget = cfg.budget if cfg.budget in cfg.rd_budgets else cfg.rd_budgets[0]
        frames = cfg.frames if self.datum == "shapes_video" else 1
        if frames == 1:  # no slider for a still image: a slider from 0 to 0 is invalid (Bokeh's E-1021)
            self.param.frame.precedence = -1
        self.param.frame.bounds = (0, frames - 1)
        self.frame = min(self.frame, frames - 1)
        if frames > 1:
            self.param.frame.precedence = None

    def representation(self) -> dict:
        return live.explore(self.datum, self.encoder, self.budget, self.profile, self.frame)

    def _follow(self, plot, on=FOLLOWED) -> pn.pane.HoloViews:
        return follow(self, plot, on, linked_axes=False)  # see _pane

    @built_once("profile", "datum", needs="fits")
    def images(self):
        def reconstruction():
            v = self.representation()
            return plots.image(v["reconstruction"], f"{plots.LABELS[self.encoder]}: {v['psnr']:.2f} dB")

        def error():
            v = self.representation()
            return plots.error_map(v["original"], v["reconstruction"], f"{plots.LABELS[self.encoder]} error")

        return pn.Row(
            self._follow(lambda: plots.image(self.representation()["original"], f"original: {self.datum}"),
                         ("frame",)),
            self._follow(reconstruction), self._follow(error))

    @built_once("profile", "datum", needs="fits")
    def pyramid(self):
        # the levels of the original: they follow the frame only
        count = len(self.representation()["pyramid"])
        return pn.Row(*[self._follow(functools.partial(self._level, i), ("frame",)) for i in range(count)])

    def _level(self, i: int):
        levels = self.representation()["pyramid"]
        return plots.pyramid_level(levels[i], i, i == len(levels) - 1)

    @view(*VIEW_PARAMS, needs="fits")
    def summary(self):
        v = self.representation()
        return pn.pane.Markdown(
            f"**{plots.LABELS[self.encoder]}** on {self.datum}: PSNR {v['psnr']:.2f} dB, SSIM {v['ssim']:.3f}, "
            f"{v['params']} parameters (budget {self.budget}).", sizing_mode="stretch_width")

    @view("datum", "profile", needs="fits")
    def rate_distortion(self):
        rows = live.rd_rows(self.datum, self.profile)
        return _pane(plots.rd_curves(rows, f"PSNR against size: {self.datum}"))

    def main(self) -> list:
        return [self.summary, self.images, self.pyramid, self.rate_distortion]


class Ssdi8Panel(MethodPanel):
    """Choose an SSD activation, an axis and an index; see each quantisation's cost and the values per index."""

    method = METHOD[1]
    title = "SSDi8"
    intro = ("### SSDi8\nPerplexity and SSD output error of each quantisation choice (FP32, per-tensor INT8, "
             "input-only, axis-aware SSDi8 with and without the correction), and the values of an SSD activation "
             "per index along an axis: one scale per tensor against one per index.")
    controls = ("tensor", "axis", "index")

    tensor = param.Selector(default="x", objects=list(qlive.TENSORS), doc="The SSD activation shown.")
    axis = param.Selector(default="channel", objects=list(qlive.AXES["x"]), doc="The axis split.")
    index = param.Integer(default=0, bounds=(0, 63), doc="The index along the axis in the histogram.")

    @preparation(on=("profile",), label="the SSDi8 model",
                 cached=lambda s: qlive.prepared.cached(qlive.config(s.profile)),
                 message="**Preparing SSDi8** (first use: training the small Mamba-2 model)...",
                 describe="**Training SSDi8's model**: step {done} / {total}...")
    def quantised(self, s, report) -> None:
        qlive.prepare(s.profile, report)

    @param.depends("tensor", watch=True, on_init=True)
    def _axes(self):
        axes = list(qlive.AXES[self.tensor])
        self.param.axis.objects = axes
        if self.axis not in axes:
            self.axis = axes[0]

    @view("profile", needs="quantised")
    def bars(self):
        table = qlive.quant_table(self.profile)
        return pn.Column(_pane(qplots.perplexity_bars(table)), _pane(qplots.error_bars(table)))  # 720 px each

    def _values(self):
        return qlive.activations(self.profile, self.tensor, self.axis)

    def _histogram(self):
        values = self._values()
        return qplots.activation_histogram(values, min(self.index, values.sizes[values.dims[0]] - 1))

    @built_once("profile", needs="quantised")
    def histogram(self):
        return pn.Column(follow(self, lambda: qplots.activation_ranges(self._values()), QUANT_PARAMS,
                                linked_axes=False),  # 720 + 500 px side by side overflow 1400
                         follow(self, self._histogram, QUANT_PARAMS, linked_axes=False))

    def main(self) -> list:
        return [self.bars, self.histogram]


class Dashboard(MethodDashboard):
    """SSM-INR's representations in one tab, SSDi8's quantisation in the other."""

    title = "Compact models: SSM neural representations and 8-bit SSD quantisation"
    panel_types = (InrPanel, Ssdi8Panel)
    tabs = True


def app():
    return Dashboard().__panel__()


if __name__.startswith("bokeh"):
    app().servable()
