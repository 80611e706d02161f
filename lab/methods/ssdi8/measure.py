"""SSDi8's accuracy measurements of each trained model, and the plan that runs them on every core.

The first seed's model gets every measurement (:func:`measure_first`); each further seed's gets the headline's
candidates at W8A8 with and without the injected outliers (:func:`measure_seed`). Those are independent, as are the
trainings: :func:`measure_all` lays the trainings and the measurements out as one chain of steps per worker process
(:func:`plan`: trainings first, longest first, each measurement on the chain where it would end first) and runs the
chains with :func:`lab.core.parallel.run_jobs`. A measurement whose model another worker is still training waits on
the weight cache's lock and loads it (no training runs twice, no chain waits on a measurement). Each step seeds what
it draws from and runs on ``cfg.threads`` threads, so it gives the same numbers in a worker as here.

Evaluations of the same tokens under the same outliers share one float reference pass (:func:`lm.evaluate`'s
``reference``), and on the model's own activations only the (variant, weights) pairs that the claims and the
notebook read (:data:`FULL_OWN`) go through all ``n_eval`` sequences; every pair gets the ``n_eval_grid`` ones.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch
from tqdm.auto import tqdm

from lab.cache import state_path
from lab.core.runtime import threads
from lab.methods.ssdi8 import lm as LM
from lab.methods.ssdi8 import model as M
from lab.methods.ssdi8.config import Config
from lab.methods.ssdi8.train import grid_index, load_corpus, trained_model, weights_key

__all__ = ["CANDIDATES", "FULL_OWN", "SERIAL_BELOW", "backend", "head_weights", "measure_all", "measure_first",
           "measure_seed", "plan", "quantise", "run_chain", "weights_run"]

#: the variants the headline compares on every seed (fp32: the W8A8 projections alone)
CANDIDATES = ("fp32", "input_only", "input_group", "per_tensor", "ssdi8")
#: (variant, weights) pairs besides the candidates at the headline's weights whose loss on the model's own
#: activations is taken over all n_eval sequences (the float model: the competence check; per tensor at float
#: weights: a claim's detail); the others are measured on the n_eval_grid sequences only
FULL_OWN = (("fp32", "fp32"), ("per_tensor", "fp32"))
#: sequence forwards (of seq_len characters) that one training step costs, batch_size x this (measured at quick:
#: a step of 32 sequences costs about 110 evaluation forwards)
STEP_FORWARDS = 3.5
#: sequence forwards in all under which :func:`measure_all` runs everything here (about 20 s at quick's size; a
#: worker's start costs about 4 s)
SERIAL_BELOW = 12_000


def weights_run(cfg: Config) -> list[str]:
    """The weight settings of the run: fp32 and the bit widths asked for, in :data:`lm.WEIGHTS`' order."""
    return [w for w in LM.WEIGHTS if w == "fp32" or int(w[1]) in cfg.weight_bits]


def head_weights(cfg: Config) -> str:
    """The headline's weight setting: W8A8 where it is run, else the last one."""
    weights = weights_run(cfg)
    return "w8a8" if "w8a8" in weights else weights[-1]


def backend(cfg: Config) -> str:
    """The INT8 products' backend of the accuracy evaluations: ``fake`` (float32 products of the int8 codes, batched)
    where every int32 sum is below 2^24, so float32 holds it exactly and the logits equal the ``int`` path's
    (the SSD's Numba int8 kernels, the projections' ``torch._int_mm``) to float32 rounding of the float tail;
    ``int`` otherwise.
    The INT8 path itself is checked against this twin (``twin_difference``) and timed (``cpu_time``)."""
    depth = max(cfg.d_inner, cfg.chunk_size, cfg.d_state)  # the longest int8 dot product (out_proj: d_inner)
    return "fake" if depth * 127 ** 2 < 2 ** 24 else "int"


def quantise(cfg: Config, model, corpus, outliers: bool, fit: tuple[str, ...] | None = None) -> tuple[list, dict]:
    """The layers' quantisation (calibrated, corrections fitted: for the weights ``fit`` only when given) and the
    unscaled corrections c*: with the injected outlier channels, or on the model's own activations."""
    return LM.quantise(model, corpus.calib[:, :-1], outlier_channels=cfg.outlier_channels if outliers else 0,
                       outlier_scale=cfg.outlier_scale if outliers else 1.0, weight_bits=cfg.weight_bits,
                       coef=cfg.correction_scale, seed=cfg.seed, chunk_size=cfg.chunk_size, decay_bits=cfg.decay_bits,
                       backend=backend(cfg), fit=fit)


def _kw(cfg: Config) -> dict:
    return dict(chunk_size=cfg.chunk_size, decay_bits=cfg.decay_bits, backend=backend(cfg))


def _evaluate_all(cfg: Config, model, grid: torch.Tensor, rest: torch.Tensor | None, quant, full: set,
                  reference: list, bar) -> tuple[np.ndarray, ...]:
    """Loss ``(variant, weights)``, SSD output error ``(variant, weights, layer)`` and loss per evaluation sequence
    ``(variant, weights, eval_seq)`` of every variant: the error and the losses on ``grid`` (``reference``: the
    float reference of ``grid`` under ``quant``'s outliers, filled by the first evaluation when empty), then for the
    pairs in ``full`` the losses on ``rest`` (no reference pass; NaN for the other pairs, and their loss too; None:
    no rest, the loss is the grid's)."""
    weights = weights_run(cfg)
    V, W, n = len(M.VARIANTS), len(weights), len(grid) + (0 if rest is None else len(rest))
    loss, err, per_seq = np.full((V, W), np.nan), np.zeros((V, W, len(quant))), np.full((V, W, n), np.nan)
    for i, variant in enumerate(M.VARIANTS):
        for j, w in enumerate(weights):
            seqs: list = []
            _, e = LM.evaluate(model, grid, quant, variant, w, per_sequence=seqs, reference=reference, **_kw(cfg))
            if rest is not None and len(rest) and (variant, w) in full:
                LM.evaluate(model, rest, quant, variant, w, per_sequence=seqs, compare=False, **_kw(cfg))
            err[i, j], per_seq[i, j, : len(seqs)] = e.numpy(), seqs
            if len(seqs) == n:
                loss[i, j] = float(np.mean(seqs))  # every sequence has seq_len positions
            bar.update(1)
    return loss, err, per_seq


def _evaluate_parts(cfg: Config, model, tokens: torch.Tensor, own, bar) -> np.ndarray:
    """``(part, eval_seq)`` loss per sequence of SSDi8 at the headline's weights with each part of
    :data:`model.PER_TENSOR_PARTS` per tensor, on ``tokens`` (no float reference pass)."""
    out = []
    for keys in M.PER_TENSOR_PARTS.values():
        quant = [replace(lq, scales=lq.scales.per_tensor(keys)) for lq in own]
        seqs: list = []
        LM.evaluate(model, tokens, quant, "ssdi8", head_weights(cfg), per_sequence=seqs, compare=False, **_kw(cfg))
        out.append(seqs)
        bar.update(1)
    return np.array(out)


def _candidates(cfg: Config, model, tokens: torch.Tensor, quant) -> np.ndarray:
    """``(candidate, eval_seq)``: loss per sequence of :data:`CANDIDATES` at the headline's weights under
    ``quant``."""
    rows = []
    for v in CANDIDATES:
        seqs: list = []
        LM.evaluate(model, tokens, quant, v, head_weights(cfg), per_sequence=seqs, compare=False, **_kw(cfg))
        rows.append(seqs)
    return np.array(rows)


def _evaluate_full(cfg: Config, model, grid, full, reference: list, bar) -> tuple[np.ndarray, np.ndarray]:
    """Loss ``(weights,)`` and SSD output error ``(weights, layer)`` of SSDi8 with the corrections ``full`` on the
    sequences ``grid`` (``reference``: their float reference, as filled by :func:`_evaluate_all`)."""
    weights = weights_run(cfg)
    loss, err = np.zeros(len(weights)), np.zeros((len(weights), len(full)))
    for j, w in enumerate(weights):
        loss[j], e = LM.evaluate(model, grid, full, "ssdi8", w, reference=reference, **_kw(cfg))
        err[j] = e.numpy()
        bar.update(1)
    return loss, err


def measure_first(cfg: Config, model=None, corpus=None, progress: bool = False) -> dict[str, np.ndarray]:
    """Every accuracy measurement of the model of seed ``cfg.seed`` (``model``: None loads or trains it): with the
    injected outliers (every variant and weight setting on the grid, the headline's candidates on all n_eval, the
    correction at coefficient 1) and on the model's own activations (the grid, the pairs read on all n_eval, each
    part per tensor inside SSDi8). Arrays named as the run's variables; ``first`` and ``first_outliers`` are the
    seed's rows of ``seq_loss_seeds`` and ``seq_loss_seeds_outliers``."""
    with threads(cfg.threads):
        corpus = load_corpus(cfg) if corpus is None else corpus
        model = trained_model(cfg, corpus, progress=False).model if model is None else model
        V, W = len(M.VARIANTS), len(weights_run(cfg))
        bar = tqdm(total=2 * V * W + W + len(M.PER_TENSOR_PARTS) + 1, desc="quantised evaluations",
                   disable=not progress, leave=False)
        on_grid, off_grid = grid_index(len(corpus.eval), cfg.n_eval_grid)
        grid, rest = corpus.eval[on_grid], corpus.eval[off_grid]
        everything = torch.cat([grid, rest])
        w_head, out, reference = head_weights(cfg), {}, []
        quant, c_star = quantise(cfg, model, corpus, outliers=True)
        head = {(v, w_head) for v in CANDIDATES}
        out["loss"], out["ssd_error"], seq = _evaluate_all(cfg, model, grid, None, quant, set(), reference, bar)
        if len(grid) % LM.BATCH == 0:  # the grid's batches are those of all n_eval: its losses are theirs
            rows = seq[[M.VARIANTS.index(v) for v in CANDIDATES], weights_run(cfg).index(w_head)]
            out["first_outliers"] = np.concatenate([rows, _candidates(cfg, model, rest, quant)], axis=1)
        else:
            out["first_outliers"] = _candidates(cfg, model, everything, quant)
        bar.update(1)
        # coefficient 1: the whole calibration mean error (the same outliers: the same float reference)
        out["loss_full_correction"], out["ssd_error_full_correction"] = _evaluate_full(
            cfg, model, grid, LM.with_corrections(quant, c_star), reference, bar)
        own, _ = quantise(cfg, model, corpus, outliers=False)
        out["loss_own"], out["ssd_error_own"], out["seq_loss_own"] = _evaluate_all(
            cfg, model, grid, rest, own, head | set(FULL_OWN), [], bar)
        out["first"] = out["seq_loss_own"][[M.VARIANTS.index(v) for v in CANDIDATES], weights_run(cfg).index(w_head)]
        out["seq_loss_part"] = _evaluate_parts(cfg, model, everything, own, bar)
        bar.close()
    return out


def measure_seed(cfg: Config, corpus=None) -> tuple[np.ndarray, np.ndarray]:
    """The headline's ``(candidate, eval_seq)`` losses of the model of seed ``cfg.seed`` on all n_eval sequences: on
    its own activations and with the injected outliers, each calibrated and corrected anew (corrections fitted at
    the headline's weights only: the only ones these read)."""
    with threads(cfg.threads):
        corpus = load_corpus(cfg) if corpus is None else corpus
        model = trained_model(cfg, corpus, progress=False).model
        on_grid, off_grid = grid_index(len(corpus.eval), cfg.n_eval_grid)
        everything = corpus.eval[np.concatenate([on_grid, off_grid])]  # the order of seq_loss_own
        fit = (head_weights(cfg),)
        return tuple(_candidates(cfg, model, everything, quantise(cfg, model, corpus, outliers, fit)[0])
                     for outliers in (False, True))


def _costs(cfg: Config) -> tuple[dict[int, float], dict[int, float]]:
    """Expected work (sequence forwards) of each seed's training (0 when its weights are cached) and measurement."""
    grid, n, W = cfg.n_eval_grid, cfg.n_eval, len(weights_run(cfg))
    quantising = cfg.n_calib * (2 + cfg.n_layers * W)
    first = (2 * len(M.VARIANTS) * W + 2 + W) * grid + (len(CANDIDATES) + len(FULL_OWN)) * (n - grid)
    first += len(CANDIDATES) * (n - grid) + len(M.PER_TENSOR_PARTS) * n + 2 * quantising
    seeds = [replace(cfg, seed=cfg.seed + k) for k in range(cfg.n_seeds)]
    train = {c.seed: 0.0 if cfg.use_cache and state_path("ssdi8", "mamba2-lm", weights_key(c)).exists()
             else STEP_FORWARDS * cfg.train_steps * cfg.batch_size for c in seeds}
    measure = {c.seed: float(first) if c.seed == cfg.seed else 2.0 * (len(CANDIDATES) * n + quantising)
               for c in seeds}
    return train, measure


def plan(train: dict[int, float], measure: dict[int, float], workers: int) -> list[list[tuple[str, int]]]:
    """Steps ``("train", seed)`` and ``("measure", seed)`` laid out as at most ``workers`` chains: the trainings
    first (longest first, each on the chain that ends first), then each measurement (largest first) on the chain
    where it would end first, counting the wait for its model's training on another chain."""
    chains: list[list[tuple[str, int]]] = [[] for _ in range(max(1, workers))]
    end, ready = [0.0] * len(chains), {}
    for seed in sorted((s for s, c in train.items() if c > 0), key=lambda s: -train[s]):
        i = int(np.argmin(end))
        chains[i].append(("train", seed))
        end[i] += train[seed]
        ready[seed] = end[i]
    for seed in sorted(measure, key=lambda s: -measure[s]):
        finish = [max(e, ready.get(seed, 0.0)) + measure[seed] for e in end]
        i = int(np.argmin(finish))
        chains[i].append(("measure", seed))
        end[i] = finish[i]
    return [c for c in chains if c]


def run_chain(cfg: Config, steps: list[tuple[str, int]]) -> dict:
    """One chain of :func:`plan` (in a worker process): each training into the weight cache, then each
    measurement (:func:`measure_first` for ``cfg.seed``, :func:`measure_seed` for the others), by seed."""
    out = {}
    corpus = load_corpus(cfg)
    for kind, seed in steps:
        other = replace(cfg, seed=seed)
        if kind == "train":
            with threads(cfg.threads):
                trained_model(other, corpus, progress=False)
        elif seed == cfg.seed:
            out[seed] = measure_first(cfg, corpus=corpus)
        else:
            out[seed] = measure_seed(other, corpus)
    return out


def measure_all(cfg: Config, progress: bool = True) -> dict | None:
    """Every seed's training and measurements in worker processes (:func:`plan`, :func:`run_chain`) when there is
    more than one worker (:func:`lab.core.parallel.default_workers`), the cache is on and the work is above
    :data:`SERIAL_BELOW`; None otherwise (the caller measures here).

    Returns:
        seed -> :func:`measure_first`'s dict (``cfg.seed``) or :func:`measure_seed`'s pair.
    """
    from lab.core.parallel import Job, default_workers, run_jobs

    train, measure = _costs(cfg)
    workers = default_workers(cfg.threads)
    if not cfg.use_cache or workers < 2 or sum(train.values()) + sum(measure.values()) < SERIAL_BELOW:
        return None
    chains = plan(train, measure, workers)
    if len(chains) < 2:
        return None
    jobs = [Job(" + ".join(f"{kind} {seed}" for kind, seed in steps), run_chain, (cfg, steps),
                cost=sum((train if kind == "train" else measure)[seed] for kind, seed in steps)) for steps in chains]
    out: dict = {}
    for result in run_jobs(jobs, workers=len(chains), threads_per_worker=cfg.threads, progress=progress,
                           desc="ssdi8 trainings and measurements"):
        out.update(result.value)
    return out
