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
from lab.methods.ssdi8.train import count_model_losses, load_corpus, trained_model

__all__ = ["run"]

#: the timed operations and implementations
OPS = ("ssd", "in_proj", "model")
IMPLS = ("fp32", "int8", "fake_quant")


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


def _evaluate_all(cfg: Config, model, corpus, quant, weights: list[str], bar) -> tuple[np.ndarray, np.ndarray]:
    """Loss ``(variant, weights)`` and SSD output error ``(variant, weights, layer)`` of every variant."""
    kw = dict(chunk_size=cfg.chunk_size, decay_bits=cfg.decay_bits)
    loss, err = np.zeros((len(M.VARIANTS), len(weights))), np.zeros((len(M.VARIANTS), len(weights), len(quant)))
    for i, variant in enumerate(M.VARIANTS):
        for j, w in enumerate(weights):
            loss[i, j], e = LM.evaluate(model, corpus.eval, quant, variant, w, **kw)
            err[i, j] = e.numpy()
            bar.update(1)
    return loss, err


def run(cfg: Config, progress: bool = True) -> xr.Dataset:
    """Train or load the model, quantise it, measure every variant.

    Returns:
        Dataset with dims variant, weights, layer, channel, chunk, op, impl, step (see each variable's long_name).
    """
    weights = _weights(cfg)
    V, W = len(M.VARIANTS), len(weights)
    kw = dict(chunk_size=cfg.chunk_size, decay_bits=cfg.decay_bits)
    with threads(cfg.threads):
        corpus = load_corpus(cfg)
        trained = trained_model(cfg, corpus, progress=progress)
        model = trained.model
        quant, c_star = LM.quantise(model, corpus.calib[:, :-1], outlier_channels=cfg.outlier_channels,
                                    outlier_scale=cfg.outlier_scale, weight_bits=cfg.weight_bits,
                                    coef=cfg.correction_scale, seed=cfg.seed, **kw)
        n_layers = len(quant)
        bar = tqdm(total=2 * V * W + W + 2, desc="quantised evaluations", disable=not progress, leave=False)
        loss, err = _evaluate_all(cfg, model, corpus, quant, weights, bar)
        own, _ = LM.quantise(model, corpus.calib[:, :-1], outlier_channels=0, outlier_scale=1.0,
                             weight_bits=cfg.weight_bits, coef=cfg.correction_scale, seed=cfg.seed, **kw)
        loss_own, err_own = _evaluate_all(cfg, model, corpus, own, weights, bar)
        unigram, bigram = count_model_losses(corpus)
        full = LM.with_corrections(quant, c_star)  # coefficient 1: the whole calibration mean error
        loss_full, err_full = np.zeros(W), np.zeros((W, n_layers))
        for j, w in enumerate(weights):
            loss_full[j], e = LM.evaluate(model, corpus.eval, full, "ssdi8", w, **kw)
            err_full[j] = e.numpy()
            bar.update(1)
        sample = corpus.eval[: LM.BATCH, :-1]
        twin_w = "w8a8" if "w8a8" in weights else weights[-1]
        lg_int = LM.forward(model, sample, quant, "ssdi8", twin_w, backend="int", **kw)
        lg_fake = LM.forward(model, sample, quant, "ssdi8", twin_w, backend="fake", **kw)
        twin = float((lg_int - lg_fake).abs().max() / lg_fake.abs().max())
        bar.update(1)
        costs = _cpu_costs(cfg, model, quant, sample)
        bar.update(1)
        bar.close()
    n_chunks = quant[0].amax["x"].shape[0]
    flat = lambda t: t.reshape(*t.shape[:-2], -1).numpy()  # noqa: E731 - (..., heads, headdim) -> (..., channel)
    w_fp32, w_q = costs["weight_bytes"]
    ds = xr.Dataset(
        {
            "loss": (("variant", "weights"), loss, {"long_name": "evaluation next-character cross-entropy",
                                                    "units": "nats/char"}),
            "perplexity": (("variant", "weights"), np.exp(loss), {"long_name": "evaluation perplexity",
                                                                  "units": "1"}),
            "ssd_error": (("variant", "weights", "layer"), err,
                          {"long_name": "SSD output error against the float model on the same tokens, "
                                        "Σ|Y' - Y|² / Σ|Y|²", "units": "1"}),
            "loss_own": (("variant", "weights"), loss_own,
                         {"long_name": "evaluation next-character cross-entropy on the model's own activations (no "
                                       "injected outliers; calibrated and corrected anew)", "units": "nats/char"}),
            "ssd_error_own": (("variant", "weights", "layer"), err_own,
                              {"long_name": "SSD output error against the float model, on the model's own "
                                            "activations (no injected outliers), Σ|Y' - Y|² / Σ|Y|²", "units": "1"}),
            "unigram_loss": ((), unigram, {"long_name": "evaluation loss of character frequencies of the training "
                                                        "split (add-one smoothed)", "units": "nats/char"}),
            "bigram_loss": ((), bigram, {"long_name": "evaluation loss of a bigram count model of the training split "
                                                      "(add-one smoothed): the bar the float model must beat",
                                         "units": "nats/char"}),
            "loss_full_correction": (("weights",), loss_full, {"long_name": "loss of SSDi8 with correction "
                                                                            "coefficient 1", "units": "nats/char"}),
            "ssd_error_full_correction": (("weights", "layer"), err_full,
                                          {"long_name": "SSD output error of SSDi8 with correction coefficient 1",
                                           "units": "1"}),
            "correction": (("weights", "layer", "channel"), np.stack([[flat(c) for c in c_star[w]] for w in weights]),
                           {"long_name": "c*: calibration mean of Y - Y' per SSD output channel (unscaled)",
                            "units": "1"}),
            "outlier": (("layer", "channel"), np.stack([flat(q.outlier) for q in quant]),
                        {"long_name": "factor of each SSD input channel (function-preserving)", "units": "1"}),
            "x_amax": (("layer", "chunk", "channel"), np.stack([flat(q.amax["x"]) for q in quant]),
                       {"long_name": "calibration amax of the SSD input x per chunk and channel", "units": "1"}),
            "states_amax": (("layer", "channel"), np.stack([flat(q.amax["states"]) for q in quant]),
                            {"long_name": "calibration amax of the entering states per (head, headdim)",
                             "units": "1"}),
            "twin_difference": ((), twin, {"long_name": "max |logits(int8) - logits(fake-quant)| / max |logits|",
                                           "units": "1"}),
            "cpu_time": (("op", "impl"), costs["times"],
                         {"long_name": f"wall time on {costs['tokens'][0]} x {costs['tokens'][1]} characters, "
                                       f"{cfg.threads} thread(s), min of {cfg.timing_repeats}", "units": "s"}),
            "ssd_bytes": (("path",), np.array(costs["ssd_bytes"], float),
                          {"long_name": "bytes held between the SSD's stages (layer 0, the timed batch)",
                           "units": "B"}),
            "weight_bytes": (("weights",), np.array([w_fp32 if w == "fp32" else w_q[w] for w in weights], float),
                             {"long_name": "bytes of in_proj and out_proj, all layers, as held (4-bit codes in int8)",
                              "units": "B"}),
            "train_loss": (("step",), np.asarray(trained.curves.get("loss", np.zeros(0)), float),
                           {"long_name": "training loss", "units": "nats/char"}),
        },
        coords={
            "variant": ("variant", list(M.VARIANTS), {"long_name": "SSD quantisation"}),
            "weights": ("weights", weights, {"long_name": "in_proj / out_proj quantisation"}),
            "layer": ("layer", np.arange(n_layers)),
            "channel": ("channel", np.arange(cfg.d_inner), {"long_name": "SSD channel (head x headdim)"}),
            "chunk": ("chunk", np.arange(n_chunks)),
            "op": ("op", list(OPS)),
            "impl": ("impl", list(IMPLS)),
            "path": ("path", ["fp32", "int8"]),
            "step": ("step", np.arange(len(trained.curves.get("loss", [])))),
        },
        attrs={"train_time_s": float(trained.meta.get("train_time_s", math.nan)),
               "train_final_loss": float(trained.meta.get("final_loss", math.nan)),
               "from_cache": int(trained.loaded), "correction_scale": cfg.correction_scale,
               "correction_weights": "w4a8" if "w4a8" in weights else weights[-1], "twin_weights": twin_w,
               "eval_chars": int(corpus.eval[:, 1:].numel()), "calib_chars": int(corpus.calib[:, 1:].numel()),
               "files_train": corpus.files["train"], "files_calib": corpus.files["calib"],
               "files_eval": corpus.files["eval"], "outlier_scale": cfg.outlier_scale,
               "outlier_channels": cfg.outlier_channels, "threads": cfg.threads,
               "load_before": costs["load"][0], "load_after": costs["load"][1], "cpu_count": os.cpu_count() or 0,
               "machine": platform.machine(), "torch": str(torch.__version__), "python": platform.python_version()},
    )
    return ds
