"""SSDi8 experiments: train (or load) a small Mamba-2 character model, inject outlier channels, calibrate, fit the
corrections, then measure every SSD variant under every weight setting (loss, perplexity, SSD output error), the
INT8 path against its fake-quant twin, and the CPU time and memory of the INT8 path against float32. The same
variants again on the model's own activations (no injected outliers, calibrated and corrected anew), and the loss of
character count models, the bar the trained float model must beat."""

from __future__ import annotations

import math
import os
import platform
import time
from dataclasses import replace

import numpy as np
import torch
import torch.nn.functional as F
import xarray as xr
from tqdm.auto import tqdm

import kernels
from lab.core.runtime import threads
from lab.methods.ssdi8 import lm as LM
from lab.methods.ssdi8 import model as M
from lab.methods.ssdi8.config import Config
from lab.methods.ssdi8.train import count_model_losses, grid_index, load_corpus, train_all, trained_model
from lab.results import Coord, Schema, Var

__all__ = ["run"]

#: the timed operations and implementations
OPS = ("ssd", "in_proj", "model")
IMPLS = ("fp32", "int8", "fake_quant")

_ERROR = "Σ|Y' - Y|² / Σ|Y|²"
SCHEMA = Schema(
    Var("loss", ("variant", "weights"), "evaluation next-character cross-entropy (the n_eval_grid sequences)",
        "nats/char"),
    Var("perplexity", ("variant", "weights"), "evaluation perplexity (the n_eval_grid sequences)"),
    Var("ssd_error", ("variant", "weights", "layer"),
        f"SSD output error against the float model on the same tokens (the n_eval_grid sequences), {_ERROR}"),
    Var("loss_own", ("variant", "weights"), "evaluation next-character cross-entropy on the model's own activations "
                                             "(no injected outliers; calibrated and corrected anew; all n_eval "
                                             "sequences)", "nats/char"),
    Var("ssd_error_own", ("variant", "weights", "layer"),
        f"SSD output error against the float model, on the model's own activations (no injected outliers; the "
        f"n_eval_grid sequences), {_ERROR}"),
    Var("seq_loss_own", ("variant", "weights", "eval_seq"), "next-character cross-entropy of each evaluation "
        "sequence on the model's own activations (the paired evaluation noise between variants; the n_eval_grid "
        "sequences first)", "nats/char"),
    Var("seq_loss_part", ("part", "eval_seq"), "next-character cross-entropy of each evaluation sequence, SSDi8 at "
        "W8A8 on the model's own activations with one part's scales per tensor (the others axis-aware)",
        "nats/char"),
    Var("seq_loss_seeds", ("seed", "candidate", "eval_seq"), "next-character cross-entropy of each evaluation "
        "sequence at W8A8 on the model's own activations, per trained model (the own-activation non-inferiority "
        "row; the first seed's values are seq_loss_own's)", "nats/char"),
    Var("seq_loss_seeds_outliers", ("seed", "candidate", "eval_seq"), "next-character cross-entropy of each "
        "evaluation sequence at W8A8 with the injected outlier channels (all n_eval sequences, in seq_loss_own's "
        "order), per trained model, each calibrated and corrected anew: the headline's comparison", "nats/char"),
    Var("eval_file", ("eval_seq",), "the evaluation file each evaluation sequence starts in (index among the files "
        "read; the sequences of one file are not independent: the claims' standard errors are clustered by it)",
        dtype=int),
    Var("unigram_loss", (), "evaluation loss of character frequencies of the training split (add-one smoothed; "
                            "all n_eval sequences)", "nats/char"),
    Var("bigram_loss", (), "evaluation loss of a bigram count model of the training split (add-one smoothed; all "
                           "n_eval sequences): the bar the float model must beat", "nats/char"),
    Var("loss_full_correction", ("weights",), "loss of SSDi8 with correction coefficient 1", "nats/char"),
    Var("ssd_error_full_correction", ("weights", "layer"), "SSD output error of SSDi8 with correction coefficient 1"),
    Var("correction", ("weights", "layer", "channel"),
        "c*: calibration mean of Y - Y' per SSD output channel (unscaled)", dtype=np.float32),
    Var("outlier", ("layer", "channel"), "factor of each SSD input channel (function-preserving)", dtype=np.float32),
    Var("x_amax", ("layer", "chunk", "channel"), "calibration amax of the SSD input x per chunk and channel",
        dtype=np.float32),
    Var("states_amax", ("layer", "channel"), "calibration amax of the entering states per (head, headdim)",
        dtype=np.float32),
    Var("twin_difference", (), "max |logits(int8) - logits(fake-quant)| / max |logits|"),
    Var("cpu_time", ("op", "impl"), "wall time on {batch} x {length} characters, {threads} thread(s), min of "
                                    "{repeats}", "s"),
    Var("ssd_bytes", ("path",), "bytes held between the SSD's stages (layer 0, the timed batch)", "B"),
    Var("weight_bytes", ("weights",), "bytes of in_proj and out_proj, all layers, as held (4-bit codes in int8)",
        "B"),
    Var("train_loss", ("step",), "training loss", "nats/char"),
    coords={"variant": Coord("SSD quantisation"), "weights": Coord("in_proj / out_proj quantisation"),
            "channel": Coord("SSD channel (head x headdim)")},
)


def _weights(cfg: Config) -> list[str]:
    return [w for w in LM.WEIGHTS if w == "fp32" or int(w[1]) in cfg.weight_bits]


def _best(fn, repeats: int) -> float:
    """Smallest wall time of ``repeats`` calls, after one untimed call."""
    fn()
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def _loadavg() -> float:
    try:
        return float(os.getloadavg()[0])
    except OSError:
        return math.nan


@torch.no_grad()
def _cpu_costs(cfg: Config, model, quant, tokens: torch.Tensor) -> dict:
    """Wall time of the SSD (layer 0), in_proj (layer 0) and the whole model on ``tokens`` ``(b, L)`` in float32,
    on the INT8 path and on its fake-quant twin; bytes held between the SSD's stages and of the projections."""
    rec = LM.Recorder(len(quant), keep=True)
    LM.forward(model, tokens, quant, chunk_size=cfg.chunk_size, recorder=rec)
    a = rec.inputs[0]
    args = (a["x"], a["dt"], a["A"], a["B"], a["C"], a["D"])
    lq, block = quant[0], model.stack.blocks[0]
    u = block.norm(model.embedding(tokens))
    lin = lq.linears.get("w8a8") or next(iter(lq.linears.values()))
    kw = dict(chunk_size=cfg.chunk_size, decay_bits=cfg.decay_bits)
    weights = "w8a8" if "w8a8" in lq.linears else _weights(cfg)[-1]
    calls = {
        ("ssd", "fp32"): lambda: kernels.ssd(*args[:5], cfg.chunk_size, D=args[5]),
        ("ssd", "int8"): lambda: M.ssd_int8(*args, lq.scales, backend="int", **kw),
        ("ssd", "fake_quant"): lambda: M.ssd_int8(*args, lq.scales, backend="fake", **kw),
        ("in_proj", "fp32"): lambda: F.linear(u, block.mixer.in_proj.weight),
        ("in_proj", "int8"): lambda: lin[0](u, "int"),
        ("in_proj", "fake_quant"): lambda: lin[0](u, "fake"),
        ("model", "fp32"): lambda: LM.forward(model, tokens, quant, **kw),
        ("model", "int8"): lambda: LM.forward(model, tokens, quant, "ssdi8", weights, backend="int", **kw),
        ("model", "fake_quant"): lambda: LM.forward(model, tokens, quant, "ssdi8", weights, backend="fake", **kw),
    }
    load_before = _loadavg()
    times = np.array([[_best(calls[(op, impl)], cfg.timing_repeats) for impl in IMPLS] for op in OPS])
    held: dict = {}
    M.ssd_int8(*args, lq.scales, backend="int", held=held, **kw)
    int8_bytes = sum(n * size for n, size in held.values())
    fp32_bytes = sum(n * 4 for name, (n, _) in held.items() if name != "xs")  # the float path holds no xs
    w_fp32 = sum(b.mixer.in_proj.weight.nbytes + b.mixer.out_proj.weight.nbytes for b in model.stack.blocks)
    w_q = {w: sum(q.linears[w][0].nbytes + q.linears[w][1].nbytes for q in quant) for w in lq.linears}
    return {"times": times, "ssd_bytes": (fp32_bytes, int8_bytes), "weight_bytes": (w_fp32, w_q),
            "load": (load_before, _loadavg()), "tokens": tuple(tokens.shape)}


def _backend(cfg: Config) -> str:
    """The INT8 products' backend of the accuracy evaluations: ``fake`` (float32 products of the int8 codes, batched)
    where every int32 sum is below 2^24, so float32 holds it exactly and the logits equal the ``int`` path's
    (``torch._int_mm``, one call per head and chunk: about 2M calls per quick run) bit for bit; ``int`` otherwise.
    The INT8 path itself is checked against this twin (``twin_difference``) and timed (``cpu_time``)."""
    depth = max(cfg.d_inner, cfg.chunk_size, cfg.d_state)  # the longest int8 dot product (out_proj: d_inner)
    return "fake" if depth * 127 ** 2 < 2 ** 24 else "int"


def _quantise(cfg: Config, model, corpus, outliers: bool) -> tuple[list, dict]:
    """The layers' quantisation (calibrated, corrections fitted) and the unscaled corrections c*: with the injected
    outlier channels, or on the model's own activations (``outliers=False``)."""
    return LM.quantise(model, corpus.calib[:, :-1], outlier_channels=cfg.outlier_channels if outliers else 0,
                       outlier_scale=cfg.outlier_scale if outliers else 1.0, weight_bits=cfg.weight_bits,
                       coef=cfg.correction_scale, seed=cfg.seed, chunk_size=cfg.chunk_size, decay_bits=cfg.decay_bits,
                       backend=_backend(cfg))


def _evaluate_all(cfg: Config, model, grid: torch.Tensor, rest: torch.Tensor | None, quant, weights: list[str],
                  bar) -> tuple[np.ndarray, ...]:
    """Loss ``(variant, weights)``, SSD output error ``(variant, weights, layer)`` and loss per evaluation sequence
    ``(variant, weights, eval_seq)`` of every variant: the error on the sequences ``grid`` (beside the float
    model), the losses on ``grid`` followed by ``rest`` (no float reference pass; None: none)."""
    kw = dict(chunk_size=cfg.chunk_size, decay_bits=cfg.decay_bits, backend=_backend(cfg))
    V, W, n = len(M.VARIANTS), len(weights), len(grid) + (0 if rest is None else len(rest))
    loss, err, per_seq = np.zeros((V, W)), np.zeros((V, W, len(quant))), np.zeros((V, W, n))
    for i, variant in enumerate(M.VARIANTS):
        for j, w in enumerate(weights):
            seqs: list = []
            _, e = LM.evaluate(model, grid, quant, variant, w, per_sequence=seqs, **kw)
            if rest is not None and len(rest):
                LM.evaluate(model, rest, quant, variant, w, per_sequence=seqs, compare=False, **kw)
            err[i, j], per_seq[i, j] = e.numpy(), seqs
            loss[i, j] = float(np.mean(seqs))  # every sequence has seq_len positions
            bar.update(1)
    return loss, err, per_seq


def _evaluate_parts(cfg: Config, model, tokens: torch.Tensor, own, bar) -> np.ndarray:
    """``(part, eval_seq)`` loss per sequence of SSDi8 at W8A8 (or the lowest weights run) with each part of
    :data:`model.PER_TENSOR_PARTS` per tensor, on ``tokens`` (no float reference pass)."""
    w = "w8a8" if "w8a8" in own[0].linears else next(iter(own[0].linears))
    out = []
    for keys in M.PER_TENSOR_PARTS.values():
        quant = [replace(lq, scales=lq.scales.per_tensor(keys)) for lq in own]
        seqs: list = []
        LM.evaluate(model, tokens, quant, "ssdi8", w, chunk_size=cfg.chunk_size, decay_bits=cfg.decay_bits,
                    backend=_backend(cfg), per_sequence=seqs, compare=False)
        out.append(seqs)
        bar.update(1)
    return np.array(out)


#: the variants the headline compares on every seed (fp32: the W8A8 projections alone)
CANDIDATES = ("fp32", "input_only", "input_group", "per_tensor", "ssdi8")


def _candidates(cfg: Config, model, tokens: torch.Tensor, quant, w: str) -> np.ndarray:
    """``(candidate, eval_seq)``: loss per sequence of :data:`CANDIDATES` at weights ``w`` under ``quant``."""
    rows = []
    for v in CANDIDATES:
        seqs: list = []
        LM.evaluate(model, tokens, quant, v, w, chunk_size=cfg.chunk_size, decay_bits=cfg.decay_bits,
                    backend=_backend(cfg), per_sequence=seqs, compare=False)
        rows.append(seqs)
    return np.array(rows)


def _headline_seeds(cfg: Config, corpus, tokens: torch.Tensor, first: np.ndarray, first_outliers: np.ndarray,
                    weights: list[str], bar) -> tuple[np.ndarray, np.ndarray]:
    """``(seed, candidate, eval_seq)`` twice: on the models' own activations (the first seed's losses ``first``) and
    with the injected outlier channels (the first seed's ``first_outliers``), then those of the models trained from
    seeds ``cfg.seed + 1 ...``, each calibrated and corrected anew in either setting."""
    own_out, inj_out = [first], [first_outliers]
    w = "w8a8" if "w8a8" in weights else weights[-1]
    for k in range(1, cfg.n_seeds):
        other = replace(cfg, seed=cfg.seed + k)
        model = trained_model(other, corpus, progress=False).model
        own_out.append(_candidates(cfg, model, tokens, _quantise(other, model, corpus, outliers=False)[0], w))
        inj_out.append(_candidates(cfg, model, tokens, _quantise(other, model, corpus, outliers=True)[0], w))
        bar.update(1)
    return np.stack(own_out), np.stack(inj_out)


def _evaluate_full(cfg: Config, model, grid, full, weights: list[str], bar) -> tuple[np.ndarray, np.ndarray]:
    """Loss ``(weights,)`` and SSD output error ``(weights, layer)`` of SSDi8 with the corrections ``full`` on the
    sequences ``grid``."""
    loss, err = np.zeros(len(weights)), np.zeros((len(weights), len(full)))
    for j, w in enumerate(weights):
        loss[j], e = LM.evaluate(model, grid, full, "ssdi8", w, chunk_size=cfg.chunk_size,
                                 decay_bits=cfg.decay_bits, backend=_backend(cfg))
        err[j] = e.numpy()
        bar.update(1)
    return loss, err


@torch.no_grad()
def _twin_difference(cfg: Config, model, quant, sample: torch.Tensor, weights: str) -> float:
    """max |logits(int8) - logits(fake-quant)| / max |logits| of SSDi8 at ``weights`` on ``sample``."""
    kw = dict(chunk_size=cfg.chunk_size, decay_bits=cfg.decay_bits)
    lg_int = LM.forward(model, sample, quant, "ssdi8", weights, backend="int", **kw)
    lg_fake = LM.forward(model, sample, quant, "ssdi8", weights, backend="fake", **kw)
    return float((lg_int - lg_fake).abs().max() / lg_fake.abs().max())


def _flat(t: torch.Tensor) -> np.ndarray:
    """``(..., heads, headdim)`` -> ``(..., channel)``."""
    return t.reshape(*t.shape[:-2], -1).numpy()


def _attrs(cfg: Config, trained, corpus, costs: dict, weights: list[str], twin_w: str) -> dict:
    return {"train_time_s": float(trained.meta.get("train_time_s", math.nan)),
            "train_final_loss": float(trained.meta.get("final_loss", math.nan)),
            "from_cache": int(trained.loaded), "correction_scale": cfg.correction_scale,
            "correction_weights": "w4a8" if "w4a8" in weights else weights[-1], "twin_weights": twin_w,
            "eval_chars": int(corpus.eval[:, 1:].numel()), "calib_chars": int(corpus.calib[:, 1:].numel()),
            "n_eval": int(len(corpus.eval)), "n_eval_grid": cfg.n_eval_grid,
            "files_train": corpus.files["train"], "files_calib": corpus.files["calib"],
            "files_eval": corpus.files["eval"], "outlier_scale": cfg.outlier_scale,
            "outlier_channels": cfg.outlier_channels, "threads": cfg.threads,
            "load_before": costs["load"][0], "load_after": costs["load"][1], "cpu_count": os.cpu_count() or 0,
            "machine": platform.machine(), "torch": str(torch.__version__), "python": platform.python_version()}


def run(cfg: Config, progress: bool = True) -> xr.Dataset:
    """Train or load the model, quantise it, measure every variant.

    Returns:
        Dataset with dims variant, weights, layer, channel, chunk, op, impl, path, step (see :data:`SCHEMA`).
    """
    weights = _weights(cfg)
    train_all(cfg, progress=progress)  # every seed's missing weights side by side, before any timing
    with threads(cfg.threads):
        corpus = load_corpus(cfg)
        trained = trained_model(cfg, corpus, progress=progress)
        model = trained.model
        curve = np.asarray(trained.curves.get("loss", np.zeros(0)), float)
        quant, c_star = _quantise(cfg, model, corpus, outliers=True)
        sample = corpus.eval[: LM.BATCH, :-1]
        res = SCHEMA.new(variant=list(M.VARIANTS), weights=weights, layer=np.arange(len(quant)),
                         channel=np.arange(cfg.d_inner), eval_seq=np.arange(len(corpus.eval)),
                         chunk=np.arange(quant[0].amax["x"].shape[0]), op=list(OPS), impl=list(IMPLS),
                         part=list(M.PER_TENSOR_PARTS), candidate=list(CANDIDATES),
                         seed=[cfg.seed + k for k in range(cfg.n_seeds)],
                         path=["fp32", "int8"], step=np.arange(len(curve)),
                         context={"batch": sample.shape[0], "length": sample.shape[1], "threads": cfg.threads,
                                  "repeats": cfg.timing_repeats})
        V, W = len(M.VARIANTS), len(weights)
        bar = tqdm(total=2 * V * W + W + 3 + len(M.PER_TENSOR_PARTS) + cfg.n_seeds - 1,
                   desc="quantised evaluations", disable=not progress, leave=False)
        on_grid, off_grid = grid_index(len(corpus.eval), cfg.n_eval_grid)
        grid, rest = corpus.eval[on_grid], corpus.eval[off_grid]
        res["loss"], res["ssd_error"], _ = _evaluate_all(cfg, model, grid, None, quant, weights, bar)
        own, _ = _quantise(cfg, model, corpus, outliers=False)
        res["loss_own"], res["ssd_error_own"], res["seq_loss_own"] = _evaluate_all(cfg, model, grid, rest, own,
                                                                                   weights, bar)
        res["seq_loss_part"] = _evaluate_parts(cfg, model, torch.cat([grid, rest]), own, bar)
        w_head = "w8a8" if "w8a8" in weights else weights[-1]
        first = res["seq_loss_own"][...][[M.VARIANTS.index(v) for v in CANDIDATES], weights.index(w_head)]
        first_outliers = _candidates(cfg, model, torch.cat([grid, rest]), quant, w_head)
        bar.update(1)
        res["seq_loss_seeds"], res["seq_loss_seeds_outliers"] = _headline_seeds(
            cfg, corpus, torch.cat([grid, rest]), first, first_outliers, weights, bar)
        res["eval_file"] = corpus.eval_file[np.concatenate([on_grid, off_grid])]  # the order of seq_loss_own
        res["unigram_loss"], res["bigram_loss"] = count_model_losses(corpus)
        # coefficient 1: the whole calibration mean error
        res["loss_full_correction"], res["ssd_error_full_correction"] = _evaluate_full(
            cfg, model, grid, LM.with_corrections(quant, c_star), weights, bar)
        twin_w = "w8a8" if "w8a8" in weights else weights[-1]
        res["twin_difference"] = _twin_difference(cfg, model, quant, sample, twin_w)
        bar.update(1)
        costs = _cpu_costs(cfg, model, quant, sample)
        bar.update(1)
        bar.close()
    res["perplexity"] = np.exp(res["loss"][...])
    res["correction"] = np.stack([[_flat(c) for c in c_star[w]] for w in weights])
    res["outlier"] = np.stack([_flat(q.outlier) for q in quant])
    res["x_amax"] = np.stack([_flat(q.amax["x"]) for q in quant])
    res["states_amax"] = np.stack([_flat(q.amax["states"]) for q in quant])
    res["cpu_time"] = costs["times"]
    res["ssd_bytes"] = np.array(costs["ssd_bytes"], float)
    w_fp32, w_q = costs["weight_bytes"]
    res["weight_bytes"] = np.array([w_fp32 if w == "fp32" else w_q[w] for w in weights], float)
    res["train_loss"] = curve
    return res.build(attrs=_attrs(cfg, trained, corpus, costs, weights, twin_w))
