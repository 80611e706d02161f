"""Reasoning dashboard: step through a closed-loop episode of a model driving the pointer tool, beside the same model
without the tool on the same problem (tool-use SSMs); and ChainGPT's recurrent depth: the iterations the
entropy-drop rule chose for each token of a word problem."""

from __future__ import annotations

import panel as pn
import param

from dashboards.panels import MethodDashboard, MethodPanel, field_param, preparation, view
from lab.methods.chaingpt import live as chain_live
from lab.methods.chaingpt import plots as chain_plots
from lab.methods.chaingpt.config import Config as ChainConfig
from lab.methods.tool_ssm import live, plots
from lab.methods.tool_ssm.config import KINDS, TASKS, Config

METHOD = ("tool_ssm", "chaingpt")
TITLE = "Reasoning: SSMs driving a pointer-memory tool, ChainGPT's recurrent depth"
DESCRIPTION = "An SSM's tool-use episode on long arithmetic; ChainGPT's iterations per token"

VIEW_PARAMS = ("task", "model", "length", "problem", "step", "seed", "profile")
REGIMES = ("tool", "cot")


def _fit_config(profile: str, seed: int) -> Config:
    return Config.from_profile(profile, seed=seed)


class ToolPanel(MethodPanel):
    """Pick a task, a model and a length; step through the episode: tokens, commands, the tape and its heads."""

    method = METHOD[0]
    title = "Tools: tool use unlocks length generalisation"
    intro = ("### Tool-augmented SSMs\nThe model emits commands (READ_A, READ_B, write σ, RIGHT_A, RIGHT_B, DONE); "
             "the tool's replies are appended as tokens. Trained on short problems, tested closed loop on long "
             "ones; the model without the tool must write the replies itself.")
    controls = ("task", "model", "length", "problem", "step", "profile", "seed")
    widget_options = {"step": {"type": pn.widgets.IntSlider}}

    task = param.Selector(default="add", objects=list(TASKS), doc="add: two n-digit numbers; mul: n digits times "
                                                                 "one digit (least significant digit first).")
    model = param.Selector(default="mamba", objects=list(KINDS), doc="The model (trained with and without the "
                                                                     "tool).")
    length = param.Integer(default=20, bounds=(1, 300), doc="Operand digits of the test problem (training: "
                                                            "1..train_max).")
    problem = param.Integer(default=0, bounds=(0, 50), doc="Which random problem of that length.")
    step = param.Integer(default=0, bounds=(0, 5000), doc="Tokens of the tool episode shown so far.")
    seed = field_param(Config, "seed", bounds=(0, 1000))

    # -- preparation: the two trained models (seconds at ci, longer at quick; then cached) ---------------------------
    @preparation(on=("profile", "task", "model", "seed"), label="the models",
                 cached=lambda s: all(live.trained_model.cached(s.task, s.model, r, _fit_config(s.profile, s.seed),
                                                                None) for r in REGIMES),
                 message="**Training {model}** on {task}, with and without the tool (first use; then cached)...")
    def models(self, s, report) -> None:
        cfg = _fit_config(s.profile, s.seed)
        for i, regime in enumerate(REGIMES):
            live.trained_model(s.task, s.model, regime, cfg, None)
            report(i + 1, total=len(REGIMES))

    def result(self) -> dict:
        return live.episode(self.task, self.length, self.model, self.seed, self.profile, self.problem)

    @param.depends("task", "model", "length", "problem", "seed", "profile", "models", watch=True)
    def _bounds(self):
        if not self.preparations["models"].ready:
            return
        last = len(self.result()["tool"]["steps"]) - 1
        self.param.step.bounds = (0, last)
        self.step = last if self.step == 0 or self.step > last else self.step

    # -- views -------------------------------------------------------------------------------------------------------
    @view(*VIEW_PARAMS, needs="models")
    def summary(self):
        ep = self.result()
        tool, no = ep["tool"], ep["no_tool"]

        def verdict(rec):
            if rec["correct"]:
                return "right"
            where = rec["first_wrong_digit"]
            return f"wrong from answer digit {where}" if where is not None else "wrong"

        return pn.pane.Markdown(
            f"**{ep['length']}-digit {ep['task']}** (training: 1..{ep['train_max']} digits), {ep['model']}: "
            f"with the tool **{verdict(tool)}** ({tool['errors']} error tokens); without it (chain of thought) "
            f"**{verdict(no)}**.", sizing_mode="stretch_width")

    @view(*VIEW_PARAMS, needs="models")
    def tape(self):
        return pn.pane.HoloViews(plots.tape(self.result(), self.step))

    @view(*VIEW_PARAMS, needs="models")
    def digits(self):
        return pn.pane.HoloViews(plots.digits_right(self.result()))

    @view(*VIEW_PARAMS, needs="models")
    def tokens(self):
        ep = self.result()
        return pn.Column(
            pn.pane.Markdown("**With the tool** (grey: question, blue: the model, green: the tool, red: errors)"),
            pn.pane.HTML(plots.tokens_html(ep, "tool", self.step, limit=160), sizing_mode="stretch_width"),
            pn.pane.Markdown("**Without the tool** (the model writes the observations itself)"),
            pn.pane.HTML(plots.tokens_html(ep, "no_tool", None, limit=160), sizing_mode="stretch_width"),
            sizing_mode="stretch_width")

    def main(self) -> list:
        return [self.summary, self.tape, self.digits, self.tokens]


class ChainPanel(MethodPanel):
    """Pick a word problem's length and sequence and the stopping threshold τ; see each token's iterations."""

    method = METHOD[1]
    title = "ChainGPT: recurrent depth"
    intro = ("### ChainGPT: recurrent depth\nA looped core block runs until the output entropy stops dropping "
             "(H_{t-k} - H_t <= τ): easy tokens stop early.")
    controls = ("length", "sequence", "tau")
    widget_options = {"tau": {"type": pn.widgets.FloatSlider}}

    length = param.Selector(default=None, objects=[None], label="ChainGPT length",
                            doc="Length of the ChainGPT word problem (training length or a test length).")
    sequence = param.Integer(default=0, bounds=(0, 7), label="ChainGPT sequence",
                             doc="Which test sequence ChainGPT reads.")
    tau = field_param(ChainConfig, "stop_tau", bounds=(0.0, 0.5), label="ChainGPT τ")

    @param.depends("profile", watch=True, on_init=True)
    def _lengths(self):
        cfg = self.config
        lengths = [cfg.state_train_length, *cfg.state_test_lengths]
        self.param.length.objects = lengths
        if self.length not in lengths:
            self.length = lengths[-1]
        last = min(cfg.n_test, 64) - 1
        self.param.sequence.bounds = (0, last)
        self.sequence = min(self.sequence, last)

    @preparation(on=("profile",), label="ChainGPT's model",
                 cached=lambda s: chain_live.stopping_trace.cached(ChainConfig.from_profile(s.profile), 0),
                 message="**Training ChainGPT** (first use; cached on disk afterwards)...")
    def trained(self, s, report) -> None:
        chain_live.stopping_trace(self.config_of(s.profile), 0)  # trains (then caches) the model
        report(1)

    @view("length", "sequence", "tau", "profile", needs="trained")
    def iterations(self):
        trace = chain_live.stopping_trace(self.config, self.sequence, self.length, tau=round(float(self.tau), 4))
        return pn.pane.HoloViews(list(chain_plots.stopping_trace(trace))[0])

    def main(self) -> list:
        return [self.iterations]


class Dashboard(MethodDashboard):
    """A tool-use episode step by step over ChainGPT's iterations per token."""

    title = "Reasoning: tool use unlocks length generalisation; recurrent depth per token"
    panel_types = (ToolPanel, ChainPanel)


def app():
    return Dashboard().__panel__()


if __name__.startswith("bokeh"):
    app().servable()
