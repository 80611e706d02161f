"""SSDi8 experiments: train (or load) a small Mamba-2 character model, inject outlier channels, calibrate, fit the
corrections, then measure every SSD variant under every weight setting (loss, perplexity, SSD output error), the
INT8 path against its fake-quant twin, and the CPU time and memory of the INT8 path against float32. The same
variants again on the model's own activations (no injected outliers, calibrated and corrected anew), and the loss of
character count models, the bar the trained float model must beat. The accuracy measurements and their layout over
the cores: :mod:`.measure`."""

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

import kernels
from lab.core.runtime import threads
from lab.methods.ssdi8 import lm as LM
from lab.methods.ssdi8 import measure as ME
from lab.methods.ssdi8 import model as M
from lab.methods.ssdi8.config import Config
from lab.methods.ssdi8.train import count_model_losses, grid_index, load_corpus, trained_model
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
                                             "sequences) of the pairs the claims and the notebook read (the "
                                             "headline's candidates at its weights, measure.FULL_OWN); NaN for the "
                                             "others (their losses per grid sequence in seq_loss_own)",
        "nats/char"),
    Var("ssd_error_own", ("variant", "weights", "layer"),
        f"SSD output error against the float model, on the model's own activations (no injected outliers; the "
        f"n_eval_grid sequences), {_ERROR}"),
    Var("seq_loss_own", ("variant", "weights", "eval_seq"), "next-character cross-entropy of each evaluation "
        "sequence on the model's own activations (the paired evaluation noise between variants; the n_eval_grid "
        "sequences first, measured for every pair; the others for the pairs of loss_own, NaN for the rest)",
        "nats/char"),
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
    Var("twin_difference", (), "max |logits(int8) - logits(fake-quant)| / max |logits| of the whole model (float "
        "rounding in each layer's tail can flip a code of the next layer: it compounds over layers)"),
    Var("twin_ssd_difference", ("layer",), "max |y(int8) - y(fake-quant)| / max |y(fake-quant)| of the layer's SSD, "
        "both on the same inputs (the fake-quant forward's)"),
    Var("twin_codes_differ", ("layer",), "int8 codes of the layer's SSD (x, B, C, CB, chunk states, passed states) "
        "that differ between the INT8 kernels and the fake-quant twin on the same inputs", "codes", dtype=int),
    Var("twin_codes", ("layer",), "int8 codes compared per layer", "codes", dtype=int),
    Var("twin_proj_difference", ("layer",), "max |out(int8) - out(fake-quant)| / max |out(fake-quant)| of the "
        "layer's in_proj and out_proj (the larger), both on the same inputs (the fake-quant forward's)",
        missing="NaN at fp32 weights (no INT8 projection)"),
    Var("cpu_time", ("op", "impl"), "wall time on {batch} x {length} characters, {threads} thread(s), min of "
                                    "{repeats}", "s"),
    Var("ssd_bytes", ("path",), "bytes held between the SSD's stages (layer 0, the timed batch)", "B"),
    Var("weight_bytes", ("weights",), "bytes of in_proj and out_proj, all layers, as held (4-bit codes in int8)",
        "B"),
    Var("train_loss", ("step",), "training loss", "nats/char"),
    coords={"variant": Coord("SSD quantisation"), "weights": Coord("in_proj / out_proj quantisation"),
            "channel": Coord("SSD channel (head x headdim)")},
)


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
    weights = ME.head_weights(cfg)
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


@torch.no_grad()
def _twin_difference(cfg: Config, model, quant, sample: torch.Tensor, weights: str) -> dict:
    """The INT8 path against its fake-quant twin, SSDi8 at ``weights`` on ``sample``.

    Returns:
        ``logits``: max |logits(int8) - logits(fake-quant)| / max |logits| of the whole model (each layer's float
        tail rounds differently, the next layer's inputs move by that rounding, and a code on a rounding boundary
        there flips, so this compounds over layers); per layer, on the same inputs (the fake-quant forward's):
        ``ssd`` (layer,) max |y(int8) - y(fake-quant)| / max |y(fake-quant)|, ``codes_differ`` (layer,) the number of
        int8 codes that differ, ``codes`` (layer,) how many were compared and ``proj`` (layer,) the same relative
        difference for in_proj and out_proj (the larger; NaN without INT8 projections).
    """
    def rel(a: torch.Tensor, b: torch.Tensor) -> float:
        return float((a - b).abs().max() / b.abs().max())

    kw = dict(chunk_size=cfg.chunk_size, decay_bits=cfg.decay_bits)
    lg_int = LM.forward(model, sample, quant, "ssdi8", weights, backend="int", **kw)
    rec = LM.Recorder(len(quant), keep=True)
    lg_fake = LM.forward(model, sample, quant, "ssdi8", weights, backend="fake", recorder=rec, **kw)
    out = {"logits": rel(lg_int, lg_fake), "ssd": [], "codes_differ": [], "codes": [], "proj": []}
    for inputs, lq in zip(rec.inputs, quant):
        args = [inputs[k] for k in ("x", "dt", "A", "B", "C", "D")]
        got, want = {}, {}
        y_int = M.ssd_int8(*args, lq.scales, backend="int", codes=got, **kw)
        y_fake = M.ssd_int8(*args, lq.scales, backend="fake", codes=want, **kw)
        out["ssd"].append(rel(y_int, y_fake))
        out["codes_differ"].append(sum(int((got[k] != want[k]).sum()) for k in want))
        out["codes"].append(sum(want[k].numel() for k in want))
        lins = lq.linears.get(weights)
        out["proj"].append(math.nan if lins is None else max(
            rel(lin(inputs[k], "int"), lin(inputs[k], "fake")) for lin, k in zip(lins, ("u", "g"))))
    return out


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
    """Train or load the models, quantise them, measure every variant (the seeds' trainings and measurements on
    every core where that pays: :func:`measure.measure_all`), then time the INT8 path here, alone.

    Returns:
        Dataset with dims variant, weights, layer, channel, chunk, op, impl, path, step (see :data:`SCHEMA`).
    """
    weights = ME.weights_run(cfg)
    measured = ME.measure_all(cfg, progress=progress)
    with threads(cfg.threads):
        corpus = load_corpus(cfg)
        trained = trained_model(cfg, corpus, progress=progress)
        model = trained.model
        if measured is None:  # here, one seed after the other
            measured = {cfg.seed: ME.measure_first(cfg, model, corpus, progress=progress)}
            for k in range(1, cfg.n_seeds):
                measured[cfg.seed + k] = ME.measure_seed(replace(cfg, seed=cfg.seed + k), corpus)
        curve = np.asarray(trained.curves.get("loss", np.zeros(0)), float)
        quant, c_star = ME.quantise(cfg, model, corpus, outliers=True)  # the first measurement's, again
        sample = corpus.eval[: LM.BATCH, :-1]
        res = SCHEMA.new(variant=list(M.VARIANTS), weights=weights, layer=np.arange(len(quant)),
                         channel=np.arange(cfg.d_inner), eval_seq=np.arange(len(corpus.eval)),
                         chunk=np.arange(quant[0].amax["x"].shape[0]), op=list(OPS), impl=list(IMPLS),
                         part=list(M.PER_TENSOR_PARTS), candidate=list(ME.CANDIDATES),
                         seed=[cfg.seed + k for k in range(cfg.n_seeds)],
                         path=["fp32", "int8"], step=np.arange(len(curve)),
                         context={"batch": sample.shape[0], "length": sample.shape[1], "threads": cfg.threads,
                                  "repeats": cfg.timing_repeats})
        first = measured[cfg.seed]
        for var in ("loss", "ssd_error", "loss_own", "ssd_error_own", "seq_loss_own", "seq_loss_part",
                    "loss_full_correction", "ssd_error_full_correction"):
            res[var] = first[var]
        others = [measured[cfg.seed + k] for k in range(1, cfg.n_seeds)]
        res["seq_loss_seeds"] = np.stack([first["first"], *(own for own, _ in others)])
        res["seq_loss_seeds_outliers"] = np.stack([first["first_outliers"], *(inj for _, inj in others)])
        on_grid, off_grid = grid_index(len(corpus.eval), cfg.n_eval_grid)
        res["eval_file"] = corpus.eval_file[np.concatenate([on_grid, off_grid])]  # the order of seq_loss_own
        res["unigram_loss"], res["bigram_loss"] = count_model_losses(corpus)
        twin_w = ME.head_weights(cfg)
        twin = _twin_difference(cfg, model, quant, sample, twin_w)
        res["twin_difference"], res["twin_ssd_difference"] = twin["logits"], twin["ssd"]
        res["twin_codes_differ"], res["twin_codes"] = twin["codes_differ"], twin["codes"]
        res["twin_proj_difference"] = twin["proj"]
        costs = _cpu_costs(cfg, model, quant, sample)
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
