"""Tools dashboard: step through a closed-loop episode of a model driving the pointer tool, beside the same model
without the tool on the same problem; and ChainGPT's recurrent depth: the iterations the entropy-drop rule chose for
each token of a word problem."""

from __future__ import annotations

import panel as pn
import param

from dashboards.viewer import BackgroundJob, MethodViewer, field_param
from lab.methods.chaingpt import live as chain_live
from lab.methods.chaingpt import plots as chain_plots
from lab.methods.chaingpt.config import Config as ChainConfig
from lab.methods.tool_ssm import live, plots
from lab.methods.tool_ssm.config import KINDS, TASKS, Config

METHOD = ("tool_ssm", "chaingpt")
TITLE = "Tools: SSMs driving a pointer-memory tool"

VIEW_PARAMS = ("task", "model", "length", "problem", "step", "seed", "profile", "version")


class Dashboard(MethodViewer):
    """Pick a task, a model and a length; step through the episode: tokens, commands, the tape and its heads."""

    method = METHOD[0]
    title = "Tools: tool use unlocks length generalisation"
    intro = ("### Tool-augmented SSMs\nThe model emits commands (READ_A, READ_B, write σ, RIGHT_A, RIGHT_B, DONE); "
             "the tool's replies are appended as tokens. Trained on short problems, tested closed loop on long "
             "ones; the model without the tool must write the replies itself.")

    task = param.Selector(default="add", objects=list(TASKS), doc="add: two n-digit numbers; mul: n digits times "
                                                                 "one digit (least significant digit first).")
    model = param.Selector(default="mamba", objects=list(KINDS), doc="The model (trained with and without the "
                                                                     "tool).")
    length = param.Integer(default=20, bounds=(1, 300), doc="Operand digits of the test problem (training: "
                                                            "1..train_max).")
    problem = param.Integer(default=0, bounds=(0, 50), doc="Which random problem of that length.")
    step = param.Integer(default=0, bounds=(0, 5000), doc="Tokens of the tool episode shown so far.")
    seed = field_param(Config, "seed", bounds=(0, 1000))
    chain_length = param.Selector(default=None, objects=[None], label="ChainGPT length",
                                  doc="Length of the ChainGPT word problem (training length or a test length).")
    chain_index = param.Integer(default=0, bounds=(0, 7), label="ChainGPT sequence",
                                doc="Which test sequence ChainGPT reads.")
    chain_tau = field_param(ChainConfig, "stop_tau", bounds=(0.0, 0.5), label="ChainGPT τ")
    chain_version = param.Integer(default=0, precedence=-1, doc="Bumped when ChainGPT's model is ready.")

    def __init__(self, **params):
        super().__init__(**params)
        self.chain_job = BackgroundJob()
        self._chain_ready: set[str] = set()
        self._chain_lengths()
        self.param.watch(lambda *_: self._chain_ensure(), ["profile"])
        if pn.state.curdoc is not None and pn.state.curdoc.session_context is not None:
            pn.state.onload(self._chain_ensure)
        else:
            self._chain_ensure()

    # -- ChainGPT: its word-problem model, trained in a second background job on first use ------------------------
    def chain_config(self) -> ChainConfig:
        return ChainConfig.from_profile(self.profile)

    @param.depends("profile", watch=True)
    def _chain_lengths(self):
        cfg = self.chain_config()
        lengths = [cfg.state_train_length, *cfg.state_test_lengths]
        self.param.chain_length.objects = lengths
        if self.chain_length not in lengths:
            self.chain_length = lengths[-1]
        self.param.chain_index.bounds = (0, min(cfg.n_test, 64) - 1)
        self.chain_index = min(self.chain_index, min(cfg.n_test, 64) - 1)

    def _chain_ensure(self) -> None:
        profile = self.profile
        if profile in self._chain_ready or self.chain_job.running:
            return

        def work(report):
            chain_live.stopping_trace(self.chain_config(), 0)  # trains (then caches) the model
            self._chain_ready.add(profile)
            report(1)

        def done():
            self.chain_job.clear()
            self.chain_version += 1
            self._chain_ensure()  # the profile may have changed meanwhile

        self.chain_job.start(work, total=1, message="**Training ChainGPT** (first use; cached on disk afterwards)...",
                             describe=None, on_done=done, name="chaingpt-prepare")

    @param.depends("chain_length", "chain_index", "chain_tau", "profile", "chain_version")
    def chain(self):
        if self.profile not in self._chain_ready or self.chain_job.running:
            return pn.pane.Markdown("*waiting for ChainGPT's model...*")
        trace = chain_live.stopping_trace(self.chain_config(), self.chain_index, self.chain_length,
                                          tau=round(float(self.chain_tau), 4))
        return pn.pane.HoloViews(list(chain_plots.stopping_trace(trace))[0])

    # -- preparation: the two trained models (seconds at ci, longer at quick; then cached) -------------------------
    def prep_params(self) -> tuple[str, ...]:
        return ("profile", "task", "model", "seed")

    def fit_config(self) -> Config:
        return Config.from_profile(self.profile, seed=self.seed)

    def is_prepared(self) -> bool:
        cfg = self.fit_config()
        return all(live.trained_model.cached(self.task, self.model, r, cfg, None) for r in ("tool", "cot"))

    def prepare(self, report) -> None:
        cfg = self.fit_config()
        for i, regime in enumerate(("tool", "cot")):
            live.trained_model(self.task, self.model, regime, cfg, None)
            report(i + 1, total=2)

    def describe_progress(self, info: dict) -> str:
        return f"**Training {self.model}** on {self.task}, with and without the tool (first use; then cached)..."

    def result(self) -> dict:
        return live.episode(self.task, self.length, self.model, self.seed, self.profile, self.problem)

    @param.depends("task", "model", "length", "problem", "seed", "profile", "version", watch=True)
    def _bounds(self):
        if not self.ready:
            return
        last = len(self.result()["tool"]["steps"]) - 1
        self.param.step.bounds = (0, last)
        self.step = last if self.step == 0 or self.step > last else self.step

    # -- views -----------------------------------------------------------------------------------------------------
    @param.depends(*VIEW_PARAMS)
    @MethodViewer.when_ready
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

    @param.depends(*VIEW_PARAMS)
    @MethodViewer.when_ready
    def tape(self):
        return pn.pane.HoloViews(plots.tape(self.result(), self.step))

    @param.depends(*VIEW_PARAMS)
    @MethodViewer.when_ready
    def digits(self):
        return pn.pane.HoloViews(plots.digits_right(self.result()))

    @param.depends(*VIEW_PARAMS)
    @MethodViewer.when_ready
    def tokens(self):
        ep = self.result()
        return pn.Column(
            pn.pane.Markdown("**With the tool** (grey: question, blue: the model, green: the tool, red: errors)"),
            pn.pane.HTML(plots.tokens_html(ep, "tool", self.step, limit=160), sizing_mode="stretch_width"),
            pn.pane.Markdown("**Without the tool** (the model writes the observations itself)"),
            pn.pane.HTML(plots.tokens_html(ep, "no_tool", None, limit=160), sizing_mode="stretch_width"),
            sizing_mode="stretch_width")

    def __panel__(self):
        widgets = self.widgets(("task", "model", "length", "problem", "step", "profile", "seed"),
                               step={"type": pn.widgets.IntSlider})
        chain_widgets = self.widgets(("chain_length", "chain_index", "chain_tau"),
                                     chain_tau={"type": pn.widgets.FloatSlider})
        chain_text = pn.pane.Markdown("### ChainGPT: recurrent depth\nA looped core block runs until the output "
                                      "entropy stops dropping (H_{t-k} - H_t <= τ): easy tokens stop early.")
        return self.layout(sidebar=[widgets, chain_text, chain_widgets],
                           main=[self.summary, self.tape, self.digits, self.tokens, pn.layout.Divider(),
                                 self.chain_job.status, self.chain_job.progress, self.chain])


def app():
    return Dashboard().__panel__()


if __name__.startswith("bokeh"):
    app().servable()
