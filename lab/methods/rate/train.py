"""RATE's training: every agent on the same offline oracle data, equal step budgets, cached weights.

The data of a seed: ``n_train`` oracle trajectories of every corridor length from 2 to T_train = K x N. Each step
draws one length and a batch of its trajectories. RATE, RATE without the valve, the long DT (context T_train) and
the GRU read whole trajectories; the short DT (context K) reads windows of K steps (half of them ending at the
turn, the rest anywhere), as a DT is trained. The loss is the cross-entropy of every action, the final turn
weighted by ``turn_weight``. Training is :func:`lab.core.train.fit` on ``cfg.device``; weights are cached under
``<data>/rate/`` by everything that shapes them.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from lab.cache import Trained, cached_model, cached_state
from lab.checks import check_choice
from lab.core.train import fit, seed_everything
from lab.methods.rate import env as E
from lab.methods.rate import model as M
from lab.methods.rate.config import VARIANTS, Config

__all__ = ["FORMAT", "VARIANTS", "build", "oracle_data", "scores", "test_episodes", "trained", "train_sampler",
           "weights_path"]

#: bump when training changes (invalidates cached weights)
FORMAT = 2


def build(cfg: Config, variant: str, obs_dim: int = E.OBS_DIM, n_actions: int = E.N_ACTIONS,
          context: int | None = None, segment: int | None = None) -> torch.nn.Module:
    """A freshly initialised agent ``variant`` (seed the global generator first). ``context``: the long DT's
    (default T_train); ``segment``: K (default ``cfg.segment_length``)."""
    check_choice("variant", variant, VARIANTS)
    d, L, H, K = cfg.d_model, cfg.n_layers, cfg.n_heads, segment or cfg.segment_length
    if variant in ("rate", "rate_no_valve", "rate_detached"):
        return M.RATE(obs_dim, n_actions, d, L, H, K, cfg.n_memory, valve=variant != "rate_no_valve",
                      valve_form=cfg.valve_form, detach=cfg.detach_memory or variant == "rate_detached")
    if variant == "dt_short":
        return M.DecisionTransformer(obs_dim, n_actions, d, L, H, K)
    if variant == "dt_long":
        return M.DecisionTransformer(obs_dim, n_actions, d, L, H, context or cfg.train_max)
    return M.GRUPolicy(obs_dim, n_actions, d, L)


def oracle_data(cfg: Config, seed: int) -> dict[int, E.Trajectories]:
    """The offline data of a seed: ``n_train`` oracle trajectories per corridor length 2 .. T_train."""
    rng = np.random.default_rng(seed + 12_345)
    return {L: E.oracle(L, cfg.n_train, rng, cfg.turn_weight) for L in range(2, cfg.train_max + 1)}


def train_sampler(data: dict[int, E.Trajectories], batch: int, seed: int, window: int | None = None):
    """``sample(step) -> (rtg, obs, actions, weights)``: a batch of one random length; with ``window``, windows of
    at most ``window`` steps (half of them ending at the final turn)."""
    rng = np.random.default_rng(seed + 777)
    lengths = sorted(data)

    def sample(step: int):
        trajs = data[lengths[int(rng.integers(len(lengths)))]]
        part = trajs.take(torch.from_numpy(rng.integers(len(trajs), size=batch)))
        T = part.rtg.shape[1]
        if window is not None and T > window:
            start = T - window if rng.random() < 0.5 else int(rng.integers(T - window + 1))
            sl = slice(start, start + window)
            return part.rtg[:, sl], part.obs[:, sl], part.actions[:, sl], part.weights[:, sl]
        return part.rtg, part.obs, part.actions, part.weights

    return sample


def _loss(model, batch):
    rtg, obs, actions, weights = batch
    return M.weighted_loss(model(rtg, obs, actions), actions, weights)


def fit_agent(cfg: Config, model: torch.nn.Module, sample, steps: int, seed: int, desc: str) -> dict:
    """Train ``model`` on ``sample`` with :func:`lab.core.train.fit`; curves and timings for the cache."""
    res = fit(model, sample, steps=steps, loss=_loss, lr=cfg.lr, weight_decay=cfg.weight_decay, seed=seed,
              progress=False, desc=desc, device=cfg.device)
    return {"curves": {"loss": res.loss},
            "meta": {"seconds": res.wall_time_s, "cpu_seconds": res.cpu_time_s, "steps": res.steps}}


def _same(cfg: Config, variant: str) -> tuple[Config, str]:
    """``rate_detached`` is ``rate`` with ``detach_memory=True``: the same weights, cached once."""
    if variant == "rate_detached":
        return dataclasses.replace(cfg, detach_memory=True), "rate"
    return cfg, variant


def _key(cfg: Config, variant: str, seed: int) -> dict:
    cfg, variant = _same(cfg, variant)
    form = {"valve_form": cfg.valve_form, "detach": cfg.detach_memory} if variant in ("rate", "rate_no_valve") else {}
    return {"format": FORMAT, **form, "variant": variant, "seed": seed, "K": cfg.segment_length, "N": cfg.n_segments,
            "n_memory": cfg.n_memory, "d_model": cfg.d_model, "n_layers": cfg.n_layers, "n_heads": cfg.n_heads,
            "steps": cfg.steps, "batch_size": cfg.batch_size, "lr": cfg.lr, "weight_decay": cfg.weight_decay,
            "turn_weight": cfg.turn_weight, "n_train": cfg.n_train}


def trained(cfg: Config, variant: str, seed: int, *, root: str | None = None) -> Trained:
    """Agent ``variant`` of seed ``seed`` trained on the T-Maze (from the cache when it is there)."""
    check_choice("variant", variant, VARIANTS)

    def make():
        seed_everything(seed)
        return build(cfg, variant)

    def train(model):
        window = cfg.segment_length if variant == "dt_short" else None
        sample = train_sampler(oracle_data(cfg, seed), cfg.batch_size, seed, window)
        return fit_agent(cfg, model, sample, cfg.steps, seed, variant)

    return cached_model("rate", f"tmaze-{_same(cfg, variant)[1]}", _key(cfg, variant, seed), make, train, root=root)


def test_episodes(seed: int, length: int, n: int) -> tuple[np.ndarray, np.random.Generator]:
    """The clues of ``n`` test episodes of one corridor length (half each way, shuffled) and the generator of their
    noise: the same for every agent of a seed."""
    rng = np.random.default_rng([seed, length, 99])
    clues = rng.permutation(np.resize(np.array([-1, 1]), n))
    return clues, rng


def scores(cfg: Config, variant: str, seed: int, agent: Trained | None = None) -> dict[str, np.ndarray]:
    """Closed-loop test of a trained agent on every corridor of ``cfg.eval_lengths`` with
    :meth:`Config.episodes` episodes each (:func:`env.outcomes`: the greedy rollout's results), cached beside the
    weights: ``{"success", "turned"}``, each ``(n_lengths,)`` in %, NaN where the agent is not tested."""
    tests = [(L, cfg.episodes(variant, L)) for L in cfg.eval_lengths]
    key = {**_key(cfg, variant, seed), "tests": tests}

    def make():
        model = (agent or trained(cfg, variant, seed)).model
        success, turned = np.full(len(tests), np.nan), np.full(len(tests), np.nan)
        for i, (length, n) in enumerate(tests):
            if n:
                out = E.outcomes(model, length, *test_episodes(seed, length, n))
                success[i], turned[i] = 100.0 * out["success"].mean(), 100.0 * out["turned"].mean()
        return {"success": success, "turned": turned}

    state, _ = cached_state("rate", f"tmaze-eval-{_same(cfg, variant)[1]}", key, make)
    return {k: np.asarray(v) for k, v in state.items()}



def weights_path(cfg: Config, variant: str, seed: int):
    """Where the T-Maze agent ``variant`` of seed ``seed`` is cached (whether or not it exists)."""
    from lab.cache import state_path

    return state_path("rate", f"tmaze-{_same(cfg, variant)[1]}", _key(cfg, variant, seed))
