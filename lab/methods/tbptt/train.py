"""Truncated-BPTT training runs with a burn-in, on :func:`lab.core.train.fit`, cached by
:func:`lab.cache.cached_model`; and their evaluation as simulators over whole records.

A window length's whole grid (every seed at every burn-in, and the control's re-runs at m = 0) is one
:class:`Grid`: for the LSTM one training of K stacked models (:mod:`.fused`: each model its own loss, initial
weights and batches; no global gradient clip, which would tie them), for the GRU and the LRU one training per model.

The records are standardised with the training record's mean and standard deviation (inputs and outputs apart);
every MSE here is on the standardised outputs, averaged over output channels, as in the paper's tables.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from lab.cache import cached_model
from lab.datasets.systems import SPLITS, Splits, load_system
from lab.methods.tbptt import model as M
from lab.methods.tbptt.config import Config

__all__ = ["BENCHMARK", "FORMAT", "RERUN_OFFSET", "Grid", "Records", "evaluate", "evaluate_grid", "load_benchmark",
           "load_records", "train_grid", "train_run"]

#: bump when training or the model changes (invalidates cached weights)
FORMAT = 2
#: the control's re-run at m = 0 starts from seed + this offset: other initial weights, other batch order
RERUN_OFFSET = 10_000


#: the standardised records: the shared :class:`lab.datasets.systems.Splits` (train, val, test)
Records = Splits


#: the paper's RLC benchmark record, shipped with the method (benchmark/README.md: source, licence)
BENCHMARK = Path(__file__).parent / "benchmark" / "rlc.npz"


def load_benchmark() -> Splits:
    """The paper's RLC benchmark record (:data:`BENCHMARK`): input voltage; capacitor voltage and inductor current."""
    with np.load(BENCHMARK) as z:
        return Splits("rlc_bench", {s: z[f"u_{s}"].astype(float) for s in SPLITS},
                      {s: z[f"y_{s}"].astype(float) for s in SPLITS})


def load_records(cfg: Config) -> Records:
    """The system's records (cached; the benchmark's shipped), standardised with the training record's statistics."""
    s = load_benchmark() if cfg.system == "rlc_bench" else load_system(cfg.system, cfg.n_train, cfg.n_val,
                                                                         cfg.n_test, seed=cfg.seed)
    mu_u, sd_u = s.u["train"].mean(0), s.u["train"].std(0) + 1e-12
    mu_y, sd_y = s.y["train"].mean(0), s.y["train"].std(0) + 1e-12
    return Records(cfg.system, {k: (v - mu_u) / sd_u for k, v in s.u.items()},
                   {k: (v - mu_y) / sd_y for k, v in s.y.items()})


def _key(cfg: Config, kind: str, N: int, m: int, seed: int) -> dict:
    return {"format": FORMAT, "system": cfg.system, "data_seed": cfg.seed, "n_train": cfg.n_train,
            "n_val": cfg.n_val, "n_test": cfg.n_test, "kind": kind, "hidden": cfg.hidden, "N": N, "m": m,
            "stride": cfg.stride, "steps": cfg.steps, "batch_size": cfg.batch_size, "lr": cfg.lr, "seed": seed}


def train_run(cfg: Config, rec: Records, kind: str, N: int, m: int, seed: int, *, progress: bool = False):
    """Train one model on the length-``N`` subsequences of the training record with burn-in ``m``, or load it.

    Arguments:
        kind: ``lstm``, ``gru`` or ``lru``. seed: initial weights and batch order.
    Returns:
        :class:`lab.cache.Trained` (``curves["loss"]`` the burn-in loss per step; ``meta["cpu_s"]``).
    """
    x, t = M.subsequences(rec.u["train"], rec.y["train"], N, cfg.stride)  # (W, N, n_in), (W, N, n_out)

    def loss(model, batch):
        xb, tb = batch
        return M.burn_in_loss(model(xb), tb, m)

    def train(model):
        from lab.core.train import fit

        start = time.process_time()
        res = fit(model, x, t, loss=loss, steps=cfg.steps, epochs=None, batch_size=cfg.batch_size, lr=cfg.lr,
                  seed=seed, progress=progress, desc=f"{kind} N={N} m={m}", device=cfg.device)
        return {"curves": {"loss": res.loss}, "meta": {"cpu_s": time.process_time() - start,
                                                        "wall_s": res.wall_time_s, "steps": res.steps}}

    return cached_model("tbptt", f"{cfg.system}-{kind}", _key(cfg, kind, N, m, seed),
                        lambda: M.build_model(kind, rec.n_in, rec.n_out, cfg.hidden, seed), train)


def evaluate(model, rec: Records) -> dict[str, float]:
    """MSE of the model run as a simulator from the zero state over each whole record: ``{split: mse}``."""
    return {s: float(np.mean((M.simulate(model, rec.u[s]) - rec.y[s]) ** 2)) for s in SPLITS}


@dataclass
class Grid:
    """One window length's trained grid: model ``k`` was trained from ``seeds[k]`` with burn-in ``ms[k]``; the
    members are, for each seed of the config, its burn-ins in order, then its re-run (seed + RERUN_OFFSET, m = 0).

    ``final_loss`` ``(K,)``: the burn-in loss, mean of the last 10% of steps; ``cpu_s``: training CPU time (NaN
    when loaded from the cache); ``stack``: the :class:`.fused.StackedLSTM` they were trained as (LSTM only)."""

    N: int
    seeds: list[int]
    ms: list[int]
    models: list
    final_loss: np.ndarray
    cpu_s: float
    stack: object = None


def members(cfg: Config, N: int) -> tuple[list[int], list[int]]:
    """``(seeds, ms)`` of the grid at ``N``, in :class:`Grid`'s order."""
    seeds, ms = [], []
    for seed in cfg.seeds:
        for m in cfg.burn_ins(N):
            seeds.append(seed)
            ms.append(m)
        seeds.append(seed + RERUN_OFFSET)
        ms.append(0)
    return seeds, ms


def _tail(loss: np.ndarray) -> np.ndarray:
    return np.mean(loss[-max(1, len(loss) // 10):], axis=0)


def train_grid(cfg: Config, rec: Records, kind: str, N: int, *, progress: bool = False) -> Grid:
    """Train (or load) the whole grid at window length ``N`` for model ``kind`` (:class:`Grid`)."""
    seeds, ms = members(cfg, N)
    from lab.core.runtime import resolve_device

    if kind != "lstm" or resolve_device(cfg.device).type != "cpu":  # the fused grid is a CPU (Numba) kernel
        runs = [train_run(cfg, rec, kind, N, m, s, progress=progress) for s, m in zip(seeds, ms)]
        cpu = [r.meta.get("cpu_s", np.nan) if not r.loaded else np.nan for r in runs]
        return Grid(N, seeds, ms, [r.model for r in runs], np.array([_tail(r.curves["loss"]) for r in runs]),
                    float(np.sum(cpu)))
    from lab.methods.tbptt.fused import StackedLSTM, window_sampler

    x, t = M.subsequences(rec.u["train"], rec.y["train"], N, cfg.stride)
    K = len(seeds)
    weight = torch.zeros(K, N)  # model k's loss: the mean over its outputs after m_k
    for k, m in enumerate(ms):
        weight[k, m:] = 1.0 / (N - m)
    per_model: list[np.ndarray] = []

    def loss(model, batch):
        xb, tb = batch  # (K, N, n_in, B), (K, N, n_out, B)
        each = (((model(xb) - tb) ** 2).mean((2, 3)) * weight).sum(1)  # (K,)
        per_model.append(each.detach().numpy().copy())
        return each.sum()

    def train(stack):
        from lab.core.train import fit

        start = time.process_time()
        res = fit(stack, window_sampler(x, t, seeds, cfg.batch_size), loss=loss, steps=cfg.steps, lr=cfg.lr,
                  clip=None, progress=progress, desc=f"lstm N={N}: {K} models", device=cfg.device)
        losses = np.stack(per_model)  # (steps, K)
        return {"curves": {"loss": res.loss}, "meta": {"cpu_s": time.process_time() - start,
                                                        "final_loss": _tail(losses).tolist(),
                                                        "wall_s": res.wall_time_s, "steps": res.steps}}

    def build():
        return StackedLSTM.from_models([M.build_model("lstm", rec.n_in, rec.n_out, cfg.hidden, s) for s in seeds])

    key = {**_key(cfg, "lstm", N, -1, -1), "ms": ms, "seeds": seeds, "trainer": "stacked"}
    tr = cached_model("tbptt", f"{cfg.system}-lstm-grid", key, build, train)
    models = []
    for k, s in enumerate(seeds):
        one = M.build_model("lstm", rec.n_in, rec.n_out, cfg.hidden, s)
        tr.model.unstack(k, one)
        models.append(one.eval())
    return Grid(N, seeds, ms, models, np.asarray(tr.meta["final_loss"]),
                np.nan if tr.loaded else float(tr.meta["cpu_s"]), tr.model)


@torch.no_grad()
def evaluate_grid(grid: Grid, rec: Records) -> np.ndarray:
    """Each model's MSE as a simulator from the zero state over each whole record: ``(K, len(SPLITS))``."""
    if grid.stack is None:
        return np.array([list(evaluate(m, rec).values()) for m in grid.models])
    K = len(grid.models)
    out = np.empty((K, len(SPLITS)))
    for j, s in enumerate(SPLITS):
        u = torch.as_tensor(rec.u[s], dtype=torch.float32)  # (T, n_in)
        y = grid.stack(u[None, :, :, None].expand(K, -1, -1, -1).contiguous())[..., 0].numpy()  # (K, T, n_out)
        out[:, j] = np.mean((y - rec.y[s][None]) ** 2, axis=(1, 2))
    return out
