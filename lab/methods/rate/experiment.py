"""RATE experiments: every agent trained on short T-Mazes (oracle data), tested closed loop on corridors up to 10x
longer, over seeds; optionally MiniGrid-Memory."""

from __future__ import annotations

import numpy as np
import xarray as xr
from tqdm.auto import tqdm

from lab.core.runtime import threads
from lab.methods.rate.config import VARIANTS, Config
from lab.methods.rate.pool import train_all
from lab.methods.rate.train import scores, trained
from lab.results import Coord, Schema, Var

__all__ = ["run"]

#: the T-Maze results (every run)
#: why a cell may hold no test
_UNTESTED = "NaN where the agent is not tested: the DTs on corridors longer than 10 x T_train"

SCHEMA = Schema(
    Var("success", ("seed", "variant", "length"), "T-Maze success: share of test episodes ending in the clue's arm "
        "(the only reward; turn accuracy); NaN: not tested (the DTs beyond 10 x T_train)", "%", missing=_UNTESTED),
    Var("turned", ("seed", "variant", "length"), "share of test episodes that reached the junction and turned "
        "(either way); NaN: not tested", "%", missing=_UNTESTED),
    Var("turn_accuracy", ("seed", "variant", "length"), "turn accuracy: share of the episodes that reached the "
        "junction and turned which turned into the clue's arm (success / turned; NaN when none turned)", "%"),
    Var("train_loss", ("seed", "variant"), "weighted training cross-entropy, mean of the last 10% of steps",
        "nats"),
    Var("train_cpu_s", ("seed", "variant"), "CPU seconds of training (when trained in this run or cached earlier)",
        "s"),
    coords={"variant": Coord("agent"), "length": Coord("corridor length (steps of an episode)", "steps")},
)

#: added when MiniGrid-Memory runs (``"minigrid" in cfg.envs``)
MINIGRID = Schema(
    Var("minigrid_success", ("seed", "variant"), "MiniGrid-MemoryS{minigrid_size}-v0 success: share of test "
        "episodes reaching the matching object", "%"),
)


def run(cfg: Config, progress: bool = True) -> xr.Dataset:
    """Train every agent of :data:`lab.methods.rate.config.VARIANTS` on each seed and test it on every corridor
    length of ``cfg.eval_lengths`` (``Config.episodes``: ``n_eval`` episodes, ``n_eval_far`` beyond 10 x T_train
    where the DTs are not tested; greedy actions, memory carried through the episode).

    Returns:
        Dataset with dims seed, variant, length (and seed, variant for MiniGrid-Memory when it runs).
    """
    grid = "minigrid" in cfg.envs
    res = (SCHEMA + MINIGRID if grid else SCHEMA).new(seed=list(cfg.seeds), variant=list(VARIANTS),
                                                      length=list(cfg.eval_lengths),
                                                      context={"minigrid_size": cfg.minigrid_size})
    train_all(cfg, progress=progress)  # the missing agents side by side; the loop reads them from the cache
    bar = tqdm(total=cfg.n_seeds * len(VARIANTS) * (1 + grid), desc="RATE agents", disable=not progress)
    with threads(cfg.threads):
        for s, seed in enumerate(cfg.seeds):
            for v, variant in enumerate(VARIANTS):
                agent = trained(cfg, variant, seed)
                res["train_loss"][s, v] = float(np.mean(agent.curves["loss"][-max(1, cfg.steps // 10):]))
                res["train_cpu_s"][s, v] = float(agent.meta.get("cpu_seconds", np.nan))
                tested = scores(cfg, variant, seed, agent)
                res["success"][s, v], res["turned"][s, v] = tested["success"], tested["turned"]
                with np.errstate(invalid="ignore", divide="ignore"):
                    res["turn_accuracy"][s, v] = np.where(tested["turned"] > 0,
                                                          100.0 * tested["success"] / tested["turned"], np.nan)
                bar.update(1)
                if grid:
                    from lab.methods.rate.minigrid import evaluate

                    res["minigrid_success"][s, v] = evaluate(cfg, variant, seed)
                    bar.update(1)
    bar.close()
    return res.build(attrs={"segment_length": cfg.segment_length, "n_segments": cfg.n_segments,
                            "train_max": cfg.train_max, "n_eval": cfg.n_eval, "n_eval_far": cfg.n_eval_far,
                            "n_memory": cfg.n_memory,
                            "envs": ",".join(cfg.envs), "minigrid_size": cfg.minigrid_size,
                            "valve_form": cfg.valve_form, "detach_memory": int(cfg.detach_memory)})
