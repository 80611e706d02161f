"""RATE experiments: every agent trained on short T-Mazes (oracle data), tested closed loop on corridors up to 10x
longer, over seeds; optionally MiniGrid-Memory."""

from __future__ import annotations

import numpy as np
import xarray as xr
from tqdm.auto import tqdm

from lab.core.runtime import threads
from lab.methods.rate.config import VARIANTS, Config
from lab.methods.rate.train import scores, trained

__all__ = ["run"]


def run(cfg: Config, progress: bool = True) -> xr.Dataset:
    """Train every agent of :data:`lab.methods.rate.config.VARIANTS` on each seed and test it on every corridor
    length of ``cfg.eval_lengths`` (``n_eval`` episodes, greedy actions, memory carried through the episode).

    Returns:
        Dataset with dims seed, variant, length (and seed, variant for MiniGrid-Memory when it runs).
    """
    S, V, Ln = cfg.n_seeds, len(VARIANTS), len(cfg.eval_lengths)
    success, turned = np.full((S, V, Ln), np.nan), np.full((S, V, Ln), np.nan)
    loss, seconds = np.full((S, V), np.nan), np.full((S, V), np.nan)
    grid = "minigrid" in cfg.envs
    mg_success = np.full((S, V), np.nan)
    bar = tqdm(total=S * V * (1 + grid), desc="RATE agents", disable=not progress)
    with threads(cfg.threads):
        for s, seed in enumerate(cfg.seeds):
            for v, variant in enumerate(VARIANTS):
                agent = trained(cfg, variant, seed)
                loss[s, v] = float(np.mean(agent.curves["loss"][-max(1, cfg.steps // 10):]))
                seconds[s, v] = float(agent.meta.get("cpu_seconds", np.nan))
                tested = scores(cfg, variant, seed, agent)
                success[s, v], turned[s, v] = tested["success"], tested["turned"]
                bar.update(1)
                if grid:
                    from lab.methods.rate.minigrid import evaluate

                    mg_success[s, v] = evaluate(cfg, variant, seed)
                    bar.update(1)
    bar.close()
    dims = ("seed", "variant", "length")
    data = {
        "success": (dims, success, {"long_name": "T-Maze success: share of test episodes ending in the clue's arm "
                                                 "(the only reward; turn accuracy)", "units": "%"}),
        "turned": (dims, turned, {"long_name": "share of test episodes that reached the junction and turned "
                                               "(either way)", "units": "%"}),
        "train_loss": (("seed", "variant"), loss, {"long_name": "weighted training cross-entropy, mean of the last "
                                                                "10% of steps", "units": "nats"}),
        "train_cpu_s": (("seed", "variant"), seconds, {"long_name": "CPU seconds of training (when trained in this "
                                                                    "run or cached earlier)", "units": "s"}),
    }
    if grid:
        data["minigrid_success"] = (("seed", "variant"), mg_success,
                                    {"long_name": f"MiniGrid-MemoryS{cfg.minigrid_size}-v0 success: share of test "
                                                  "episodes reaching the matching object", "units": "%"})
    return xr.Dataset(
        data,
        coords={
            "seed": ("seed", list(cfg.seeds)),
            "variant": ("variant", list(VARIANTS), {"long_name": "agent"}),
            "length": ("length", list(cfg.eval_lengths), {"long_name": "corridor length (steps of an episode)",
                                                          "units": "steps"}),
        },
        attrs={"segment_length": cfg.segment_length, "n_segments": cfg.n_segments, "train_max": cfg.train_max,
               "n_eval": cfg.n_eval, "n_memory": cfg.n_memory, "envs": ",".join(cfg.envs),
               "minigrid_size": cfg.minigrid_size},
    )
