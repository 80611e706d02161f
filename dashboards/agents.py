"""Agents dashboard: watch a trained agent act from memory. RATE on a T-Maze (the agent's path, the clue it saw at
the first step, the Memory Retention Valve's attention across segments, success against corridor length beside
the Decision Transformer and the other baselines); LWAIL in the U-maze (the rollout over the learned φ-distance
map, the critic's reward, success per variant over seeds)."""

from __future__ import annotations

import holoviews as hv
import panel as pn
import param

from dashboards.viewer import BackgroundJob, MethodViewer, field_param
from lab.methods.lwail import live as lwail_live
from lab.methods.lwail import plots as lwail_plots
from lab.methods.rate import live, plots
from lab.methods.rate.config import Config

METHOD = ("rate", "lwail")
TITLE = "Agents: acting from memory (RATE) and imitating in a learned metric (LWAIL)"


def _pane(obj):
    """A HoloViews object in the page; a Layout's plots side by side, each in its own pane."""
    if isinstance(obj, hv.Layout):
        return pn.Row(*(pn.pane.HoloViews(item) for item in obj))
    return pn.pane.HoloViews(obj)


class Dashboard(MethodViewer):
    """Pick a variant, a corridor length and a seed; watch RATE's rollout and its memory. Below, LWAIL's rollout in
    the maze over its learned distance map."""

    method = METHOD[0]
    title = "Agents: RATE's recurrent memory and LWAIL's latent metric"
    intro = ("### RATE\nAn offline-RL transformer reads the trajectory in segments, each framed by memory tokens "
             "[M; tokens; M]; the write-memory goes through the Memory Retention Valve (attention with the old "
             "memory as query) to the next segment. In a T-Maze the clue is shown only at the first step; only "
             "memory carries it to the junction.\n\n### LWAIL\nImitation from one state-only expert episode: a "
             "Wasserstein critic on ICVF features φ(s), φ(s') rewards the agent with sigmoid(-f).")

    env = param.Selector(default="tmaze", objects=["tmaze", "minigrid"], label="environment",
                         doc="The T-Maze (a corridor of any length) or MiniGrid-Memory (the profile's grid size).")
    variant = param.Selector(default="rate", objects=list(live.VARIANTS),
                             doc="RATE, RATE without the valve, Decision Transformer (short or long context), GRU.")
    corridor_length = param.Integer(default=30, bounds=(2, 3000), label="corridor length",
                                    doc="Length of the T-Maze's corridor at test time (training lengths are short).")
    episode_seed = param.Integer(default=0, bounds=(0, 1000), label="episode",
                                 doc="Seed of the test episode (the clue and the noise).")
    seed = field_param(Config, "seed", bounds=(0, 1000))
    lwail_variant = param.Selector(default="lwail", objects=list(lwail_live.VARIANTS), label="LWAIL variant",
                                   doc="LWAIL or one of its baselines (Euclidean WAIL, GAIfO, no ICVF, ...).")
    lwail_seed = param.Integer(default=0, bounds=(0, 9), label="LWAIL seed", doc="Seed of the LWAIL run shown.")
    lwail_version = param.Integer(default=0, precedence=-1, doc="Bumped when LWAIL's agents are ready.")

    def __init__(self, **params):
        self._curves: set[str] = set()
        super().__init__(**params)
        self.lwail_job = BackgroundJob()
        self._lwail_ready: set = set()
        self.param.watch(lambda *_: self._lwail_ensure(), ["profile", "lwail_variant", "lwail_seed"])
        if pn.state.curdoc is not None and pn.state.curdoc.session_context is not None:
            pn.state.onload(self._lwail_ensure)
        else:
            self._lwail_ensure()

    # -- RATE: the chosen variant's trained model (background on first use, then cached) ---------------------------
    def prep_params(self) -> tuple[str, ...]:
        return ("profile", "env", "variant", "seed")

    def _agent_args(self) -> tuple:
        return (self.profile, self.variant, int(self.seed)) + (("minigrid",) if self.env == "minigrid" else ())

    def is_prepared(self) -> bool:
        return self.profile in self._curves and live.trained.cached(*self._agent_args())

    def prepare(self, report) -> None:
        live.trained(*self._agent_args())
        report(1, total=2)
        live.success_curve(self.profile)  # the profile's run: every agent, every length (cached on disk)
        self._curves.add(self.profile)
        report(2)

    def describe_progress(self, info: dict) -> str:
        what = "the T-Maze" if self.env == "tmaze" else "MiniGrid-Memory"
        return f"**Training {self.variant}** on {what}, then the profile's success curves (first use; cached)..."

    def episode(self) -> dict:
        return live.rollout(self.profile, self.variant, int(self.corridor_length), int(self.seed), self.env,
                            episode_seed=int(self.episode_seed))

    @param.depends("env", "variant", "corridor_length", "episode_seed", "seed", "profile", "version")
    @MethodViewer.when_ready
    def summary(self):
        ep = self.episode()
        if self.env == "minigrid":
            verdict = "went to the matching object" if ep["success"] else "went to the wrong object"
            where = "MiniGrid-Memory"
        else:
            verdict = "turned the right way" if ep["success"] else "turned the wrong way"
            where = f"a corridor of {ep['corridor_length']} steps"
        return pn.pane.Markdown(f"**{self.variant}** on {where}, clue {int(ep['clue']):+d}: the agent **{verdict}**.",
                                sizing_mode="stretch_width")

    @param.depends("env", "variant", "corridor_length", "episode_seed", "seed", "profile", "version")
    @MethodViewer.when_ready
    def path(self):
        return _pane(plots.rollout_plot(self.episode()))

    @param.depends("env", "variant", "corridor_length", "episode_seed", "seed", "profile", "version")
    @MethodViewer.when_ready
    def memory(self):
        ep = self.episode()
        if ep.get("memory_attention") is None:
            return pn.pane.Markdown(f"*{self.variant} has no memory valve: nothing to show.*")
        return _pane(plots.memory_attention_plot(ep))

    @param.depends("profile", "version")
    @MethodViewer.when_ready
    def success(self):
        return _pane(plots.success_plot(live.success_curve(self.profile)))

    # -- LWAIL: its agents, prepared in a second background job ----------------------------------------------------
    def _lwail_key(self):
        return (self.profile, self.lwail_variant, int(self.lwail_seed))

    def _lwail_ensure(self) -> None:
        key = self._lwail_key()
        if key in self._lwail_ready or self.lwail_job.running:
            return

        def work(report):
            lwail_live.rollout(*key)  # trains (then caches) the agent
            self._lwail_ready.add(key)
            report(1)

        def done():
            self.lwail_job.clear()
            self.lwail_version += 1
            self._lwail_ensure()  # the choice may have changed meanwhile

        self.lwail_job.start(work, total=1, message="**Training LWAIL's agent** (first use; cached afterwards)...",
                             describe=None, on_done=done, name="lwail-prepare")

    def _lwail_waiting(self):
        if self._lwail_key() not in self._lwail_ready or self.lwail_job.running:
            return pn.pane.Markdown("*waiting for LWAIL's agent...*")
        return None

    @param.depends("lwail_variant", "lwail_seed", "profile", "lwail_version")
    def lwail_path(self):
        waiting = self._lwail_waiting()
        if waiting is not None:
            return waiting
        profile, variant, seed = self._lwail_key()
        episode = lwail_live.rollout(profile, variant, seed)
        dmap = lwail_live.phi_distance_map(profile, seed)
        return pn.Column(_pane(lwail_plots.rollout_plot(episode, dmap)), _pane(lwail_plots.distance_map_plot(dmap)))

    @param.depends("lwail_variant", "lwail_seed", "profile", "lwail_version")
    def lwail_reward(self):
        waiting = self._lwail_waiting()
        if waiting is not None:
            return waiting
        profile, variant, seed = self._lwail_key()
        return _pane(lwail_plots.reward_map_plot(lwail_live.reward_map(profile, variant, seed)))

    def __panel__(self):
        widgets = self.widgets(("env", "variant", "corridor_length", "episode_seed", "seed", "profile"))
        lwail_widgets = self.widgets(("lwail_variant", "lwail_seed"))
        return self.layout(sidebar=[widgets, pn.pane.Markdown("### LWAIL"), lwail_widgets],
                           main=[self.summary, self.path, self.memory, self.success, pn.layout.Divider(),
                                 pn.pane.Markdown("### LWAIL in the U-maze"), self.lwail_job.status,
                                 self.lwail_job.progress, self.lwail_path, self.lwail_reward])


def app():
    return Dashboard().__panel__()


if __name__.startswith("bokeh"):
    app().servable()
