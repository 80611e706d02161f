"""INR dashboard: SSM neural representations (LPNet-S3K and baselines), and an SSDi8 tab on Mamba-2 quantisation.

The INR tab: pick a datum, an encoder and a parameter budget; see the original, the reconstruction, the error map, the
Laplacian pyramid's levels and PSNR against size for each encoder. The fits of the chosen datum (every encoder at
every budget of the profile) are prepared in the background and cached on disk. The SSDi8 tab: perplexity and SSD
output error per quantisation choice, and the histogram of an activation per axis.
"""

from __future__ import annotations

import panel as pn
import param

from dashboards.viewer import BackgroundJob, MethodViewer
from lab.methods.ssdi8 import live as qlive
from lab.methods.ssdi8 import plots as qplots
from lab.methods.ssm_inr import live, plots

METHOD = ("ssm_inr", "ssdi8")
TITLE = "INR: state-space models as neural representations (and SSDi8)"

VIEW_PARAMS = ("datum", "encoder", "budget", "frame", "profile", "version")
QUANT_PARAMS = ("tensor", "axis", "index", "profile", "quant_version")


class Dashboard(MethodViewer):
    """Choose a datum, an encoder and a budget; see its representation and how each encoder scales."""

    method = "ssm_inr"
    title = "INR: SSM neural representations"
    intro = ("### LPNet-S3K\nAn SSM over each L x L window keeps only its final state: one strided kernel "
             "K = [Ā^{L-1}B̄ … ĀB̄ B̄] compresses and downsamples (S3K). LPNet codes each level of a Laplacian "
             "pyramid with one; a light deconvolution decoder reconstructs. Every model has the chosen number of "
             "parameters (within 10%).")

    datum = param.Selector(default="astronaut", objects=list(live.DATA), doc="The datum to represent.")
    encoder = param.Selector(default="lpnet_s3k", objects=list(live.SHOWN), doc="The model shown.")
    budget = param.Selector(default=3000, objects=[3000], doc="Parameters of the model (encoder + decoder).")
    frame = param.Integer(default=0, bounds=(0, 0), doc="Frame of the video shown.")
    tensor = param.Selector(default="x", objects=list(qlive.TENSORS), doc="SSDi8: the SSD activation shown.")
    axis = param.Selector(default="channel", objects=list(qlive.AXES["x"]), doc="SSDi8: the axis split.")
    index = param.Integer(default=0, bounds=(0, 63), doc="SSDi8: the index along the axis in the histogram.")
    quant_version = param.Integer(default=0, precedence=-1, doc="Bumped when the SSDi8 model is ready.")

    def __init__(self, **params):
        super().__init__(**params)
        self.qjob = BackgroundJob()
        self._bounds()
        self._axes()
        if pn.state.curdoc is not None and pn.state.curdoc.session_context is not None:
            pn.state.onload(self._start_quant)
        else:
            self._start_quant()

    # -- the INR fits of the chosen datum ----------------------------------------------------------------------------
    def prep_params(self) -> tuple[str, ...]:
        return ("profile", "datum")

    def is_prepared(self) -> bool:
        return live.prepared(self.datum, self.profile)

    def prepare(self, report) -> None:
        live.prepare(self.datum, self.profile, report=report)

    def describe_progress(self, info: dict) -> str:
        return (f"**Fitting** every encoder to {self.datum}: {int(info['done'])} / {int(info['total'])} "
                "(first use; cached on disk afterwards)...")

    @param.depends("profile", "datum", watch=True)
    def _bounds(self):
        cfg = live.config(self.profile)
        self.param.budget.objects = list(cfg.rd_budgets)
        if self.budget not in cfg.rd_budgets:
            self.budget = cfg.budget if cfg.budget in cfg.rd_budgets else cfg.rd_budgets[0]
        frames = cfg.frames if self.datum == "shapes_video" else 1
        self.param.frame.bounds = (0, frames - 1)
        self.frame = min(self.frame, frames - 1)

    def view(self) -> dict:
        return live.explore(self.datum, self.encoder, self.budget, self.profile, self.frame)

    @param.depends(*VIEW_PARAMS)
    @MethodViewer.when_ready
    def images(self):
        v = self.view()
        name = plots.LABELS[self.encoder]
        return pn.Row(
            pn.pane.HoloViews(plots.image(v["original"], f"original: {self.datum}")),
            pn.pane.HoloViews(plots.image(v["reconstruction"], f"{name}: {v['psnr']:.2f} dB")),
            pn.pane.HoloViews(plots.error_map(v["original"], v["reconstruction"], f"{name} error")))

    @param.depends(*VIEW_PARAMS)
    @MethodViewer.when_ready
    def pyramid(self):
        levels = self.view()["pyramid"]
        return pn.Row(*[pn.pane.HoloViews(plots.pyramid_level(lv, i, i == len(levels) - 1))
                        for i, lv in enumerate(levels)])

    @param.depends(*VIEW_PARAMS)
    @MethodViewer.when_ready
    def summary(self):
        v = self.view()
        return pn.pane.Markdown(
            f"**{plots.LABELS[self.encoder]}** on {self.datum}: PSNR {v['psnr']:.2f} dB, SSIM {v['ssim']:.3f}, "
            f"{v['params']} parameters (budget {self.budget}).", sizing_mode="stretch_width")

    @param.depends("datum", "profile", "version")
    @MethodViewer.when_ready
    def rate_distortion(self):
        rows = live.rd_rows(self.datum, self.profile)
        return pn.pane.HoloViews(plots.rd_curves(rows, f"PSNR against size: {self.datum}"))

    # -- the SSDi8 tab ---------------------------------------------------------------------------------------------
    def _start_quant(self) -> None:
        if self.qjob.running:
            return

        def done():
            self.quant_version += 1

        self.qjob.start(lambda report: qlive.prepare(self.profile, report), total=1, on_done=done,
                        message="**Preparing SSDi8** (first use: training the small Mamba-2 model)...",
                        describe=lambda info: f"**Training SSDi8's model**: step {int(info['done'])} / "
                                              f"{int(info['total'])}...", name="ssdi8-prepare")

    @param.depends("profile", watch=True)
    def _restart_quant(self):
        self._start_quant()

    @property
    def quant_ready(self) -> bool:
        return not self.qjob.running and not self.qjob.error and self.quant_version > 0

    @param.depends("tensor", watch=True)
    def _axes(self):
        axes = list(qlive.AXES[self.tensor])
        self.param.axis.objects = axes
        if self.axis not in axes:
            self.axis = axes[0]

    @param.depends(*QUANT_PARAMS)
    def quant_bars(self):
        if not self.quant_ready:
            return pn.pane.Markdown(self.qjob.error or "*waiting for the SSDi8 model...*")
        table = qlive.quant_table(self.profile)
        return pn.Row(pn.pane.HoloViews(qplots.perplexity_bars(table)), pn.pane.HoloViews(qplots.error_bars(table)))

    @param.depends(*QUANT_PARAMS)
    def quant_histogram(self):
        if not self.quant_ready:
            return pn.pane.Markdown("")
        values = qlive.activations(self.profile, self.tensor, self.axis)
        index = min(self.index, values.sizes[values.dims[0]] - 1)
        return pn.Row(pn.pane.HoloViews(qplots.activation_ranges(values)),
                      pn.pane.HoloViews(qplots.activation_histogram(values, index)))

    def __panel__(self):
        widgets = self.widgets(("datum", "encoder", "budget", "frame", "profile"))
        qwidgets = self.widgets(("tensor", "axis", "index"))
        inr = pn.Column(self.summary, self.images, self.pyramid, self.rate_distortion)
        quant = pn.Column(pn.pane.Markdown(
            "### SSDi8\nPerplexity and SSD output error of each quantisation choice (FP32, per-tensor INT8, "
            "input-only, axis-aware SSDi8 with and without the correction), and the values of an SSD activation "
            "per index along an axis: one scale per tensor against one per index."),
            qwidgets, self.qjob.status, self.qjob.progress, self.quant_bars, self.quant_histogram)
        return self.layout(sidebar=[widgets], main=[pn.Tabs(("INR", inr), ("SSDi8", quant), dynamic=False)])


def app():
    return Dashboard().__panel__()


if __name__.startswith("bokeh"):
    app().servable()
