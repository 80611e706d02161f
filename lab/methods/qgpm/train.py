"""QGPM's training runs: one MLP trained task after task on a permuted stream, by fine-tuning or with a gradient
projection memory stored at full precision, naively quantised, or as QGPM; the accuracy matrix, the basis memory and
the compute of each run.

Each run is cached whole (:func:`lab.cache.cached_state`: its accuracy matrix, memory and measurements, keyed by the
config fields that determine it, the variant and the seed), so a notebook re-run or a dashboard reads it back.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from lab.cache import cached_state
from lab.core.continual import MLP, Compute, evaluate_stream, train_task
from lab.core.train import seed_everything
from lab.datasets.streams import TaskStream, task_stream
from lab.methods.qgpm import model as G
from lab.methods.qgpm.config import Config

__all__ = ["FORMAT", "SECOND_SEED_OFFSET", "Variant", "load_stream", "memory_budget", "random_baseline",
           "run_variant", "variants"]

#: bump when a run's content changes (invalidates cached runs)
FORMAT = 3
#: the second fine-tuning run (the BWT claim's control) starts from seed + this offset
SECOND_SEED_OFFSET = 10_000


@dataclass(frozen=True)
class Variant:
    """One way to train through the stream.

    Attributes:
        name: ``finetune``, ``finetune_b``, ``gpm``, ``gpm_mm``, ``naive<k>``, ``qgpm<k>``, ``qgpm<k>_sketch``.
        mode: the memory's storage (None: no memory, fine-tuning). bits: its code width.
        qea: the quantisation-error-aware projection (``alpha`` of the config) or plain ``M̃ M̃ᵀ``.
        sketch: CountSketch before the SVD. seed_offset: added to the seed (a second fine-tuning run).
    """

    name: str
    mode: str | None = None
    bits: int = 32
    qea: bool = False
    sketch: bool = False
    seed_offset: int = 0

    @property
    def label(self) -> str:
        if self.mode is None:
            return "fine-tuning" + (" (2nd seed)" if self.seed_offset else "")
        if self.mode == "fp":
            return "GPM FP32" + (" memory-matched" if self.name == "gpm_mm" else "")
        kind = "QGPM" if self.mode == "qgpm" else "naive"
        return f"{kind} {self.bits}-bit" + (" + sketch" if self.sketch else "")


def variants(cfg: Config) -> list[Variant]:
    """The runs of a seed, in order (``gpm_mm`` needs ``qgpm8``'s memory, so it comes after it)."""
    out = [Variant("finetune"), Variant("finetune_b", seed_offset=SECOND_SEED_OFFSET), Variant("gpm", "fp")]
    for b in cfg.bits:
        out += [Variant(f"naive{b}", "naive", b), Variant(f"qgpm{b}", "qgpm", b, qea=True)]
    out.append(Variant(f"qgpm{cfg.claim_bits}_sketch", "qgpm", cfg.claim_bits, qea=True, sketch=True))
    out.append(Variant("gpm_mm", "fp"))
    return out


def load_stream(cfg: Config) -> TaskStream:
    """The config's permuted stream (cached)."""
    return task_stream("permuted", cfg.source, n_tasks=cfg.n_tasks, seed=cfg.stream_seed, n_train=cfg.n_train,
                       n_test=cfg.n_test)


def _build(cfg: Config, stream: TaskStream) -> MLP:
    return MLP(stream.d_input, cfg.hidden, stream.n_classes, bias=False)


def random_baseline(cfg: Config, stream: TaskStream, seed: int) -> np.ndarray:
    """Test accuracy (%) of the untrained network of ``seed`` on every task, ``(T,)``: FWT's reference."""
    seed_everything(seed)
    return evaluate_stream(_build(cfg, stream), stream)


def _representation(stream: TaskStream, task: int, n: int, seed: int) -> torch.Tensor:
    """``n`` training inputs of ``task`` drawn at random: ``(n, d_input)``."""
    x = stream[task].x_train
    idx = torch.from_numpy(np.random.default_rng([seed, task, 17]).permutation(len(x))[:n])
    return x[idx]


def _train(cfg: Config, stream: TaskStream, v: Variant, seed: int, budget, progress: bool) -> dict:
    seed_everything(seed + v.seed_offset)
    model = _build(cfg, stream)
    T, L = len(stream), len(cfg.thresholds)
    memory = None
    if v.mode is not None:
        memory = G.GPM(cfg.thresholds, mode=v.mode, bits=v.bits, outlier_share=cfg.outlier_share,
                       alpha=cfg.qea_alpha if v.qea else 0.0, sketch_rows=cfg.sketch_rows if v.sketch else 0,
                       max_ranks=budget, seed=seed)
    R = np.zeros((T, T))
    ranks, nbytes = np.zeros((T, L), np.int64), np.zeros((T, L), np.int64)
    similarity, random_similarity = np.full((T, L), np.nan), np.full((T, L), np.nan)
    cos_error = np.full((T, L), np.nan)
    compute = Compute()
    for t in range(T):
        hook = memory.on_step(model) if memory is not None and t > 0 else None
        compute += train_task(model, stream, t, epochs=cfg.epochs, batch_size=cfg.batch_size, lr=cfg.lr,
                              seed=seed + v.seed_offset + 1000 * t, on_step=hook, device=cfg.device,
                              progress=progress)
        R[t] = evaluate_stream(model, stream)
        if memory is None:
            continue
        x = _representation(stream, t, cfg.n_repr, seed)
        reps = compute.timed(lambda x=x: memory.update(model, x))  # after the last task too: what it leaves
        ranks[t], nbytes[t] = memory.ranks(), memory.nbytes()
        for k, blocks in enumerate(memory.stored):
            if blocks:
                cos_error[t, k] = float(np.mean(np.concatenate([q.cos_error for q in blocks])))
        if v.name == "gpm":  # the sketch claim: sketched against exact bases of this task's representation
            _compare_sketch(cfg, reps, seed, t, similarity, random_similarity)
    return {"R": R, "ranks": ranks, "bytes": nbytes, "steps": compute.steps, "wall_s": compute.wall_s,
            "cpu_s": compute.cpu_s, "similarity": similarity, "random_similarity": random_similarity,
            "cos_error": cos_error}


def _compare_sketch(cfg: Config, reps: list[np.ndarray], seed: int, t: int, out: np.ndarray,
                    rand: np.ndarray) -> None:
    """Per layer: mean cos² of the principal angles between the top-k left singular vectors of ``R (d, N)`` and of
    its CountSketch ``R Sᵀ (d, r)`` (``k`` by the layer's threshold on the exact spectrum), and between the exact
    ones and a random ``k``-dimensional subspace."""
    rng = np.random.default_rng([seed, t, 23])
    for k, (R, eps) in enumerate(zip(reps, cfg.thresholds)):
        U, s, _ = np.linalg.svd(R, full_matrices=False)
        r = G.threshold_rank(s, eps)
        if r == 0:
            continue
        Us, _, _ = np.linalg.svd(G.count_sketch(R, cfg.sketch_rows, rng), full_matrices=False)
        out[t, k] = G.subspace_similarity(U[:, :r], Us[:, :r])
        rand[t, k] = G.subspace_similarity(U[:, :r], rng.normal(size=(R.shape[0], r)))


def memory_budget(cfg: Config, stream: TaskStream, nbytes) -> list[int]:
    """FP32 basis vectors per layer that fit in ``nbytes`` (per layer, e.g. 8-bit QGPM's final memory)."""
    dims = [stream.d_input, *cfg.hidden]
    return [int(b) // (G.FP32_BYTES * d) for b, d in zip(nbytes, dims)]


def run_variant(cfg: Config, stream: TaskStream, v: Variant, seed: int, *, budget: list[int] | None = None,
                progress: bool = False) -> dict:
    """One run through the stream (from the cache, or trained now).

    Arguments:
        budget: stored vectors per layer at most (the memory-matched GPM, :func:`memory_budget`).

    Returns:
        ``R (T, T)`` accuracy matrix (%), ``ranks`` and ``bytes`` ``(T, L)`` of the memory after each task,
        ``steps``, ``wall_s``, ``cpu_s`` of training (memory updates included), ``similarity`` and
        ``random_similarity`` ``(T, L)`` (the ``gpm`` run only, else NaN), ``cos_error`` ``(T, L)``, ``loaded``.
    """
    key = {"format": FORMAT, "variant": v.name, "seed": seed, "budget": budget,
           **{n: getattr(cfg, n) for n in cfg.TRAINING_FIELDS}}
    state, loaded = cached_state("qgpm", v.name, key, lambda: _train(cfg, stream, v, seed, budget, progress),
                                 use_cache=cfg.use_cache)
    out = {k: (val.numpy() if isinstance(val, torch.Tensor) else val) for k, val in state.items()}
    out["loaded"] = loaded
    return out
