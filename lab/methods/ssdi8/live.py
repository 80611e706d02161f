"""What the ssdi8 tab of the ``compact_models`` dashboard (and a notebook) computes besides ``run``: the trained and
quantised model of a profile, the perplexity and SSD output error of every quantisation choice, and the values of the
SSD's activations along an axis for a histogram. Each is memoised in the process (:func:`lab.cache.memo`); the
corpus and the weights are cached on disk by :mod:`.train`.

``profile`` is a profile name (``ci``, ``quick``, ``full``) or a :class:`Config`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
import xarray as xr
from einops import rearrange

from kernels.ssd import ssd_chunk_cumsum, ssd_chunk_state, ssd_state_passing
from lab.cache import memo
from lab.checks import bad_value, check_choice
from lab.core.runtime import threads
from lab.methods.ssdi8 import lm as LM
from lab.methods.ssdi8 import model as M
from lab.methods.ssdi8.config import Config
from lab.methods.ssdi8.train import Corpus, grid_index, load_corpus, trained_model

__all__ = ["AXES", "TENSORS", "Prepared", "activations", "config", "prepare", "prepared", "quant_table"]

#: the activations :func:`activations` offers, and the axes each can be split along
AXES = {
    "x": ("channel", "head", "chunk"),
    "B": ("state", "group", "chunk"),
    "C": ("state", "group", "chunk"),
    "states": ("channel", "head", "state", "chunk"),
}
TENSORS = tuple(AXES)
#: at most this many values per index along the axis (a histogram needs no more)
MAX_SAMPLES = 4096


@dataclass(frozen=True)
class Prepared:
    """A profile's trained model and its quantisation: the corpus, the model, the per-layer
    :class:`lm.LayerQuant` and the unscaled corrections ``c*`` per weight setting."""

    cfg: Config
    corpus: Corpus
    model: torch.nn.Module
    quant: list
    c_star: dict


def config(profile: str | Config) -> Config:
    """The Config of a profile name (a Config is returned as it is)."""
    return profile if isinstance(profile, Config) else Config.from_profile(profile)


def prepare(profile: str | Config, report: Callable[..., None] | None = None) -> Prepared:
    """Everything the views need: trains the model on first use (``report(step, total=...)`` after each training
    step), then quantises it (:func:`prepared`)."""
    cfg = config(profile)
    if not prepared.cached(cfg) and report is not None:
        trained_model(cfg, load_corpus(cfg), progress=False, callback=lambda s, total: report(s, total=total))
    return prepared(cfg)


@memo(4)
def prepared(cfg: Config) -> Prepared:
    """The trained model of ``cfg`` (from the weight cache, or trained now), calibrated and corrected."""
    with threads(cfg.threads):
        corpus = load_corpus(cfg)
        model = trained_model(cfg, corpus, progress=False).model
        quant, c_star = LM.quantise(model, corpus.calib[:, :-1], outlier_channels=cfg.outlier_channels,
                                    outlier_scale=cfg.outlier_scale, weight_bits=cfg.weight_bits,
                                    coef=cfg.correction_scale, chunk_size=cfg.chunk_size,
                                    decay_bits=cfg.decay_bits, seed=cfg.seed)
    return Prepared(cfg, corpus, model, quant, c_star)


def quant_table(profile: str | Config) -> xr.Dataset:
    """Perplexity, loss and SSD output error of every SSD variant under every weight setting.

    Returns:
        Dataset with ``perplexity``, ``loss`` (nats/char) and ``ssd_error`` (mean over layers) over
        (variant, weights); ``attrs["fp32_perplexity"]``.
    """
    return _quant_table(config(profile))


@memo(8)
def _quant_table(cfg: Config) -> xr.Dataset:
    p = prepared(cfg)
    weights = [w for w in LM.WEIGHTS if w in ("fp32", *p.quant[0].linears)]
    grid = p.corpus.eval[grid_index(len(p.corpus.eval), cfg.n_eval_grid)[0]]  # the run's injected-outlier sequences
    loss, err = np.zeros((len(M.VARIANTS), len(weights))), np.zeros((len(M.VARIANTS), len(weights)))
    with threads(cfg.threads):
        for i, v in enumerate(M.VARIANTS):
            for j, w in enumerate(weights):
                loss[i, j], e = LM.evaluate(p.model, grid, p.quant, v, w, chunk_size=cfg.chunk_size,
                                            decay_bits=cfg.decay_bits)
                err[i, j] = float(e.mean())
    dims = ("variant", "weights")
    return xr.Dataset(
        {"loss": (dims, loss, {"long_name": "evaluation cross-entropy", "units": "nats/char"}),
         "perplexity": (dims, np.exp(loss), {"long_name": "evaluation perplexity", "units": "1"}),
         "ssd_error": (dims, err, {"long_name": "SSD output error Σ|Y' - Y|² / Σ|Y|², mean over layers",
                                   "units": "1"})},
        coords={"variant": list(M.VARIANTS), "weights": weights},
        attrs={"fp32_perplexity": float(np.exp(loss[0, 0]))},
    )


def activations(profile: str | Config, tensor: str = "x", axis: str = "channel", layer: int = 0) -> xr.DataArray:
    """Float values of one SSD activation of ``layer`` on an evaluation batch, grouped along ``axis``.

    Arguments:
        tensor: ``x`` (the SSD input, outliers injected), ``B``, ``C`` or ``states`` (the states entering each
            chunk); see :data:`AXES` for the axes of each.
        axis: the axis whose indices get their own scale in some quantiser (``channel`` = head x headdim).
    Returns:
        ``(axis, sample)`` values (at most :data:`MAX_SAMPLES` per index, evenly taken), ``attrs``: tensor, layer.
    """
    check_choice("tensor", tensor, TENSORS)
    check_choice("axis", axis, AXES[tensor])
    cfg = config(profile)
    if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < cfg.n_layers:
        raise bad_value("layer", layer, f"an integer in [0, {cfg.n_layers - 1}]")
    return _activations(cfg, tensor, axis, int(layer))


@memo(64)
def _activations(cfg: Config, tensor: str, axis: str, layer: int) -> xr.DataArray:
    values = _tensors(cfg, layer)[tensor]
    order = {"x": ("b", "chunk", "q", "head", "p"), "B": ("b", "chunk", "q", "group", "state"),
             "states": ("b", "chunk", "head", "p", "state")}[tensor if tensor != "C" else "B"]
    names = list(order)
    if axis == "channel":  # head x headdim together
        values = rearrange(values, "... h p n -> ... (h p) n") if tensor == "states" else \
            rearrange(values, "... h p -> ... (h p)")
        names = [n for n in names if n != "p"]
        names[names.index("head")] = "channel"
    t = values.movedim(names.index(axis), 0)
    t = t.reshape(t.shape[0], -1)
    step = max(1, t.shape[1] // MAX_SAMPLES)
    t = t[:, ::step][:, :MAX_SAMPLES]
    return xr.DataArray(t.numpy(), dims=(axis, "sample"), coords={axis: np.arange(t.shape[0])},
                        attrs={"tensor": tensor, "layer": layer, "long_name": f"{tensor} values", "units": "1"})


@memo(8)
def _tensors(cfg: Config, layer: int) -> dict[str, torch.Tensor]:
    """Layer ``layer``'s SSD activations on the first evaluation batch, in chunks: x ``(b, c, q, h, p)``, B and C
    ``(b, c, q, g, n)``, the entering states ``(b, c, h, p, n)``."""
    p = prepared(cfg)
    rec = LM.Recorder(len(p.quant), keep=True)
    with threads(cfg.threads), torch.no_grad():
        LM.forward(p.model, p.corpus.eval[: LM.BATCH, :-1], p.quant, chunk_size=cfg.chunk_size, recorder=rec)
        a = rec.inputs[layer]
        q = cfg.chunk_size
        dtc, dA = ssd_chunk_cumsum(a["dt"], a["A"], q)
        states, _ = ssd_state_passing(ssd_chunk_state(a["B"], a["x"], dtc, dA), dA)
    return {"x": M.chunked(a["x"], q), "B": M.chunked(a["B"], q), "C": M.chunked(a["C"], q), "states": states}
