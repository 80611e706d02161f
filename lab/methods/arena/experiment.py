"""The arena's experiment: every model on every task at one parameter budget, trained at one length and tested at
several; ``run`` builds the results Dataset, every variable declared once in :data:`SCHEMA`."""

from __future__ import annotations

import numpy as np
import torch
import xarray as xr
from tqdm.auto import tqdm

from lab.core.transformer import n_params
from lab.datasets.synthetic import make_splits
from lab.datasets.tokens import with_start_token
from lab.methods.arena import model as M
from lab.methods.arena import train as T
from lab.methods.arena.config import Config
from lab.results import Coord, Schema, Var

__all__ = ["run"]

#: why a cell has no measurement: the run does not train that model on that task
_NOT_TRAINED = "a model the run does not train on that task (A5 outside a5_models)"

SCHEMA = Schema(
    Var("accuracy", ("task", "model", "seed", "factor"), "accuracy over every labelled position", "1",
        missing=_NOT_TRAINED),
    Var("accuracy_beyond", ("task", "model", "seed", "factor"),
        "accuracy over the labelled positions beyond the training length (none at factor 1)", "1",
        missing="factor 1 has no position beyond the training length, or " + _NOT_TRAINED),
    Var("final_loss", ("task", "model", "seed"), "training loss, mean of the last 10% of steps", "nats",
        missing=_NOT_TRAINED),
    Var("train_tokens_per_s", ("task", "model", "seed"), "training tokens per second (forward and backward)",
        "tokens/s", missing=_NOT_TRAINED),
    Var("stream_tokens_per_s", ("task", "model"),
        "tokens per second read one at a time (first seed; a transformer re-reads its prefix)", "tokens/s",
        missing=_NOT_TRAINED),
    Var("state_bytes", ("task", "model", "factor"), "inference state of one sequence at the test length", "bytes"),
    Var("params", ("task", "model"), "trainable parameters", "1", dtype=int),
    Var("width", ("task", "model"), "model width d_model", "1", dtype=int),
    Var("theory", ("task", "model"), "theory's prediction at every length: 1 yes, 0 no, 0.5 open", "1"),
    coords={"task": Coord("task"), "model": Coord("architecture"), "seed": Coord("seed"),
            "factor": Coord("test length / training length", "x")},
)

_VERDICT = {"yes": 1.0, "no": 0.0, "open": 0.5}


def splits(cfg: Config, task: str) -> dict:
    """``{"train": TokenTask, factor: TokenTask, ...}`` of one task, with start tokens."""
    options = {"cyclic": {"modulus": 5}, "a5": {"generators": 1},
               "mqar": {"vocab_size": cfg.mqar_vocab, "n_pairs": cfg.mqar_pairs}}.get(task, {})
    length = cfg.length_of(task)
    raw = make_splits(task, n_train=cfg.n_train, n_test=cfg.n_test, train_length=length,
                      test_lengths=[length * f for f in cfg.test_factors], seed=cfg.seed, **options)
    out = {"train": with_start_token(raw["train"])}
    out.update({f: with_start_token(raw[f"test_{length * f}"]) for f in cfg.test_factors})
    return out


def run(cfg: Config, progress: bool = True) -> xr.Dataset:
    """Train every (task, model, seed) cell (workers, cached), then test each at every length. A cell of a model
    not trained on its task (A5 outside ``cfg.a5_models``) keeps its size (width, parameters, state bytes, theory)
    and leaves its measurements empty.

    Returns:
        Dataset with dims task, model, seed, factor (see each variable's long_name).
    """
    data = {task: splits(cfg, task) for task in cfg.tasks}
    T.train_all(cfg, [data[t]["train"] for t in cfg.tasks], progress=progress)
    res = SCHEMA.new(task=list(cfg.tasks), model=list(cfg.models), seed=list(cfg.seeds),
                     factor=list(cfg.test_factors))
    cells = [(i, task, j, kind) for i, task in enumerate(cfg.tasks) for j, kind in enumerate(cfg.models)]
    for i, task, j, kind in tqdm(cells, desc="arena cells", disable=not progress):
        split = data[task]
        res["theory"][i, j] = _VERDICT[M.prediction(kind, task).verdict]
        if kind not in cfg.models_of(task):
            model = T.untrained_model(cfg, split["train"], kind)
            res["params"][i, j], res["width"][i, j] = n_params(model), model.d_model
            for k, f in enumerate(cfg.test_factors):
                res["state_bytes"][i, j, k] = model.state_bytes(split[f].length)
            continue
        for s, seed in enumerate(cfg.seeds):
            trained = T.trained_model(cfg, split["train"], kind, seed)
            model = trained.model.eval()
            loss = np.asarray(trained.curves["loss"], dtype=float)
            res["final_loss"][i, j, s] = float(loss[-max(1, len(loss) // 10):].mean())
            res["train_tokens_per_s"][i, j, s] = (cfg.steps_of(task) * cfg.batch_size * split["train"].length
                                                  / max(float(trained.meta["train_time_s"]), 1e-9))
            for k, f in enumerate(cfg.test_factors):
                acc = T.accuracy_by_position(model, split[f])
                res["accuracy"][i, j, s, k] = float(np.nanmean(acc))
                if f > 1:
                    res["accuracy_beyond"][i, j, s, k] = float(np.nanmean(acc[1 + cfg.length_of(task):]))
            if s == 0:
                res["params"][i, j], res["width"][i, j] = n_params(model), model.d_model
                for k, f in enumerate(cfg.test_factors):
                    res["state_bytes"][i, j, k] = model.state_bytes(split[f].length)
                probe = torch.as_tensor(split[1].inputs[:8])
                res["stream_tokens_per_s"][i, j] = T.stream_tokens_per_s(model, probe, repeats=2)
    return res.build(attrs={"train_length": cfg.train_length, "state_length": cfg.state_length,
                            "a5_length": cfg.a5_length, "a5_steps": cfg.a5_steps,
                            "claim_factor": cfg.claim_factor, "budget": cfg.budget, "steps": cfg.steps,
                            "state_steps": cfg.state_steps,
                            "sources": "; ".join(f"{k}: {v}" for k, v in M.SOURCES.items())})
