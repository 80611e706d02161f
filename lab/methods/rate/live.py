"""What the ``agents`` dashboard (and a notebook) calls besides ``run``: trained agents, one episode watched
closely, the success curves.

:func:`trained` is an agent of a profile's run (the weights cached on disk under ``<data>/rate/`` by the run, and in
memory); :func:`rollout` runs it on one T-Maze (or MiniGrid-Memory) episode and returns the path, the actions, the
clue and, for RATE, the Memory Retention Valve's attention at every segment boundary; :func:`success_curve` is the
run's success against corridor length (the profile's run, cached on disk: instant once its agents are trained).
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from lab.cache import cached_run, memo
from lab.checks import bad_value, check_choice, check_int
from lab.methods.rate import env as E
from lab.methods.rate.config import ENVS, VARIANTS, Config

__all__ = ["VARIANTS", "rollout", "success_curve", "trained"]


@memo(maxsize=32)
def trained(profile: str, variant: str, seed: int = 0, env: str = "tmaze"):
    """Agent ``variant`` of the profile's run with model seed ``seed`` (memory, disk, or trained now)."""
    check_choice("variant", variant, VARIANTS)
    check_choice("env", env, ENVS)
    check_int("seed", seed, 0, 2**31 - 1)
    cfg = Config.from_profile(profile)
    if env == "minigrid":
        from lab.methods.rate import minigrid

        return minigrid.trained(cfg, variant, seed).model
    from lab.methods.rate.train import trained as train_agent

    return train_agent(cfg, variant, seed).model


def _attention(record) -> np.ndarray | None:
    if not record or record[0]["weights"] is None:
        return None
    return np.stack([r["weights"][0].numpy() for r in record])  # (n_segments, n_mem, n_mem)


@memo(maxsize=128)
def rollout(profile: str, variant: str, corridor_length: int, seed: int = 0, env: str = "tmaze", *,
            episode_seed: int = 0) -> dict:
    """One closed-loop episode of agent ``variant`` (model seed ``seed``) of the profile.

    Arguments:
        profile: whose trained agents. variant: one of :data:`VARIANTS`. corridor_length: T-Maze steps (>= 2;
            ignored for ``minigrid``, whose size is the profile's). seed: the agent's seed. env: ``tmaze`` or
            ``minigrid``. episode_seed: which test episode (its clue and noise).
    Returns:
        ``{"env", "variant", "corridor_length", "clue" (+1 / -1; minigrid: +1 key, -1 ball), "success" bool,
        "positions" (T + 1, 2) the agent's (x, y) from the start, "actions" (T,), "memory_attention"
        (n_segments, n_mem, n_mem): the valve's attention at each segment boundary (row: old memory token,
        column: written token) for ``rate`` and ``rate_detached``, None for the others; "segment_length"}``.
    """
    check_choice("variant", variant, VARIANTS)
    check_choice("env", env, ENVS)
    check_int("episode_seed", episode_seed, 0, 2**31 - 1)
    cfg = Config.from_profile(profile)
    model = trained(profile, variant, seed) if env == "tmaze" else trained(profile, variant, seed, env)
    if env == "minigrid":
        from lab.methods.rate import minigrid

        out = minigrid.episode(model, cfg.minigrid_size, [20_000_000 + episode_seed], 6 * cfg.minigrid_size)
        return {"env": env, "variant": variant, "corridor_length": None, "clue": int(out["clues"][0]),
                "success": bool(out["success"][0]), "positions": out["positions"][0],
                "actions": np.array(out["actions"][0]), "memory_attention": None,
                "segment_length": cfg.segment_length}
    length = E.check_corridor(corridor_length)
    rng = np.random.default_rng([episode_seed, 7])
    clue = np.array([rng.choice([-1, 1])])
    out = E.rollout(model, length, clue, rng, record=True)
    valved = variant in ("rate", "rate_detached")
    attention = _attention(out["record"]) if valved else None
    if valved and attention is None:
        attention = np.zeros((0, cfg.n_memory, cfg.n_memory))  # no segment completed before the turn
    return {"env": env, "variant": variant, "corridor_length": length, "clue": int(clue[0]),
            "success": bool(out["success"][0]), "positions": out["positions"][0], "actions": out["actions"][0],
            "memory_attention": attention, "segment_length": cfg.segment_length}


@memo(maxsize=4)
def _run(profile: str) -> xr.Dataset:
    from lab.methods.rate.experiment import run
    from lab.methods.rate.train import FORMAT

    cfg = Config.from_profile(profile)
    return cached_run("rate-run", "rate", cfg, lambda: run(cfg, progress=False), version=FORMAT)


def success_curve(profile: str = "quick", variants=None) -> xr.Dataset:
    """Success (%) against corridor length per agent and seed: the profile's run (dims seed, variant, length),
    restricted to ``variants`` (default: all); the Dataset's attrs say K and T_train. Pass it to
    :func:`lab.methods.rate.plots.success_plot`."""
    ds = _run(profile)
    if variants is not None:
        variants = [variants] if isinstance(variants, str) else list(variants)
        unknown = [v for v in variants if v not in VARIANTS]
        if unknown or not variants:
            raise bad_value("variants", tuple(variants), "a non-empty subset of " + ", ".join(VARIANTS))
        ds = ds.sel(variant=variants)
    return ds


def shown_length(ds: xr.Dataset, factor: int = 10) -> int:
    """The longest corridor of a :func:`success_curve` Dataset within ``factor`` times the training length: the one
    the notebook's watched episode runs on."""
    fitting = [int(L) for L in ds.length.values if L <= factor * ds.attrs["train_max"]]
    if not fitting:
        raise bad_value("factor", factor, f"a factor that keeps at least one of the lengths {list(ds.length.values)}")
    return max(fitting)
