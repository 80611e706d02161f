"""Agents dashboard: watch a trained agent act from memory. RATE on a T-Maze (the agent's path, the clue it saw at
the first step, the Memory Retention Valve's attention across segments, success against corridor length beside
the Decision Transformer and the other baselines); LWAIL in the U-maze (the rollout over the learned φ-distance
map, the critic's reward, success per variant over seeds)."""

from __future__ import annotations

import holoviews as hv
import panel as pn
import param

from dashboards.panels import MethodDashboard, MethodPanel, field_param, preparation, view
from lab.methods.lwail import live as lwail_live
from lab.methods.lwail import plots as lwail_plots
from lab.methods.rate import live, plots
from lab.methods.rate.config import Config

METHOD = ("rate", "lwail")
TITLE = "Agents: acting from memory (RATE) and imitating in a learned metric (LWAIL)"
DESCRIPTION = "RATE's memory on a T-Maze of any length; LWAIL's rollout over its learned metric"

EPISODE_PARAMS = ("env", "variant", "corridor_length", "episode_seed", "seed", "profile")


def _pane(obj):
    """A HoloViews object in the page; a Layout's plots side by side, each in its own pane."""
    if isinstance(obj, hv.Layout):
        return pn.Row(*(pn.pane.HoloViews(item) for item in obj))
    return pn.pane.HoloViews(obj)


def _agent_args(s) -> tuple:
    """The arguments of ``live.trained`` for settings ``s`` (as ``live.rollout`` passes them)."""
    return (s.profile, s.variant, int(s.seed)) + (("minigrid",) if s.env == "minigrid" else ())


class RatePanel(MethodPanel):
    """Pick a variant, a corridor length and a seed; watch RATE's rollout and its memory."""

    method = "rate"
    title = "RATE on a T-Maze"
    intro = ("### RATE\nAn offline-RL transformer reads the trajectory in segments, each framed by memory tokens "
             "[M; tokens; M]; the write-memory goes through the Memory Retention Valve (attention with the old "
             "memory as query) to the next segment. In a T-Maze the clue is shown only at the first step; only "
             "memory carries it to the junction.")
    controls = EPISODE_PARAMS

    env = param.Selector(default="tmaze", objects=["tmaze", "minigrid"], label="Environment",
                         doc="The T-Maze (a corridor of any length) or MiniGrid-Memory (the profile's grid size).")
    variant = param.Selector(default="rate", objects=list(live.VARIANTS),
                             doc="RATE, RATE without the valve, Decision Transformer (short or long context), GRU.")
    corridor_length = param.Integer(default=30, bounds=(2, 3000), label="Corridor length",
                                    doc="Length of the T-Maze's corridor at test time (training lengths are short).")
    episode_seed = param.Integer(default=0, bounds=(0, 1000), label="Episode",
                                 doc="Seed of the test episode (the clue and the noise).")
    seed = field_param(Config, "seed", bounds=(0, 1000))

    @preparation(on=("profile", "env", "variant", "seed"), label="the agent",
                 cached=lambda s: live.trained.cached(*_agent_args(s)),
                 message="**Training {variant}** in {env} (first use; cached afterwards)...")
    def agent(self, s, report) -> None:
        live.trained(*_agent_args(s))
        report(1)

    @preparation(on=("profile",), label="the success curves",
                 message="**Running the profile's agents** at every corridor length (first use; cached)...")
    def curves(self, s, report) -> None:
        live.success_curve(s.profile)  # the profile's run: every agent, every length (cached on disk)
        report(1)

    def episode(self) -> dict:
        return live.rollout(self.profile, self.variant, int(self.corridor_length), int(self.seed), self.env,
                            episode_seed=int(self.episode_seed))

    @view(*EPISODE_PARAMS, needs="agent")
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

    @view(*EPISODE_PARAMS, needs="agent")
    def path(self):
        return _pane(plots.rollout_plot(self.episode()))

    @view(*EPISODE_PARAMS, needs="agent")
    def memory(self):
        ep = self.episode()
        if ep.get("memory_attention") is None:
            return pn.pane.Markdown(f"*{self.variant} has no memory valve: nothing to show.*")
        return _pane(plots.memory_attention_plot(ep))

    @view("profile", needs="curves")
    def success(self):
        return _pane(plots.success_plot(live.success_curve(self.profile)))

    def main(self) -> list:
        return [self.summary, self.path, self.memory, self.success]


class LwailPanel(MethodPanel):
    """Pick a variant and a seed; watch LWAIL's rollout in the maze over its learned distance map."""

    method = "lwail"
    title = "LWAIL in the U-maze"
    intro = ("### LWAIL\nImitation from one state-only expert episode: a Wasserstein critic on ICVF features φ(s), "
             "φ(s') rewards the agent with sigmoid(-f).")
    controls = ("variant", "seed")

    variant = param.Selector(default="lwail", objects=list(lwail_live.VARIANTS), label="LWAIL variant",
                             doc="LWAIL or one of its baselines (Euclidean WAIL, GAIfO, no ICVF, ...).")
    seed = param.Integer(default=0, bounds=(0, 9), label="LWAIL seed", doc="Seed of the LWAIL run shown.")

    @preparation(on=("profile", "variant", "seed"), label="LWAIL's agent",
                 cached=lambda s: (lwail_live.rollout.cached(s.profile, s.variant, int(s.seed))
                                   and lwail_live.phi_distance_map.cached(s.profile, int(s.seed))),
                 message="**Training LWAIL's agent** (first use; cached afterwards)...")
    def agent(self, s, report) -> None:
        lwail_live.rollout(s.profile, s.variant, int(s.seed))  # trains (then caches) the agent
        lwail_live.phi_distance_map(s.profile, int(s.seed))  # LWAIL's own ICVF, whichever variant is shown
        report(1)

    @view("variant", "seed", "profile", needs="agent")
    def path(self):
        episode = lwail_live.rollout(self.profile, self.variant, int(self.seed))
        dmap = lwail_live.phi_distance_map(self.profile, int(self.seed))
        return pn.Column(_pane(lwail_plots.rollout_plot(episode, dmap)), _pane(lwail_plots.distance_map_plot(dmap)))

    @view("variant", "seed", "profile", needs="agent")
    def reward(self):
        return _pane(lwail_plots.reward_map_plot(lwail_live.reward_map(self.profile, self.variant, int(self.seed))))

    def main(self) -> list:
        return [self.path, self.reward]


class Dashboard(MethodDashboard):
    """RATE's rollout and memory on a T-Maze over LWAIL's rollout in the maze."""

    title = "Agents: RATE's recurrent memory and LWAIL's latent metric"
    panel_types = (RatePanel, LwailPanel)


def app():
    return Dashboard().__panel__()


if __name__.startswith("bokeh"):
    app().servable()
