"""A trained Mamba-2 language model run through SSDi8's INT8 path or a baseline (:mod:`.model`), with W8A8 / W4A8
projections (:mod:`.quant`), injected outlier channels, static calibration and the layer-by-layer error correction.

:func:`forward` is :class:`lab.core.models.CausalLM`'s forward written out per Mamba-2 block (the same function in
float) so that each piece can be swapped: ``in_proj`` and ``out_proj`` by :class:`QLinear`, the SSD by
:func:`model.ssd_variant`. Outliers: the SSD input ``x`` (after the convolution and SiLU) is multiplied by a
per-channel factor and the SSD output divided by it. Each output channel of the SSD is linear in its own input
channel (``y_p = Σ C h_p + D x_p`` with ``h_p`` driven by ``x_p`` alone), so the model's function is unchanged while
the per-tensor range of x and of the states grows by that factor.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import torch
import torch.nn.functional as F
from einops import rearrange

from lab.core.models import CausalLM
from lab.core.ssm.conv import causal_conv
from lab.methods.ssdi8.model import SSDScales, observe, outlier_vector, ssd_variant
from lab.methods.ssdi8.quant import QLinear, amax

__all__ = ["WEIGHTS", "LayerQuant", "Recorder", "calibrate", "evaluate", "fit_corrections", "forward", "quantise",
           "reference_outputs", "with_corrections"]

#: in_proj / out_proj: float, or 8-bit / 4-bit weights per output channel with INT8 inputs per tensor
WEIGHTS = ("fp32", "w8a8", "w4a8")
#: tokens per forward pass in calibration and evaluation
BATCH = 16


@dataclass
class LayerQuant:
    """What the quantisation knows about one Mamba-2 layer.

    Attributes:
        outlier: ``(heads, headdim)`` the SSD input is multiplied by it and the output divided by it.
        amax: calibration amax per quantisation point (:func:`observe`), plus ``u`` and ``g`` (the inputs of
            in_proj and out_proj, 0-d). scales: the axis-aware :class:`SSDScales`.
        linears: weight setting -> (in_proj, out_proj) as :class:`QLinear`.
        correction: weight setting -> ``(heads, headdim)`` the scaled correction ``coef · c*``.
        perm: a fixed permutation of the channels (the ``shuffled`` control).
    """

    outlier: torch.Tensor
    amax: dict = field(default_factory=dict)
    scales: SSDScales | None = None
    linears: dict = field(default_factory=dict)
    correction: dict = field(default_factory=dict)
    perm: torch.Tensor | None = None

    def correction_for(self, variant: str, weights: str) -> torch.Tensor | None:
        c = self.correction.get(weights)
        if c is None or variant not in ("ssdi8", "shuffled"):
            return None
        return c if variant == "ssdi8" else c.reshape(-1)[self.perm].reshape(c.shape)


class Recorder:
    """Collects, per layer, calibration amax (``observe=True``), and the SSD output against the float model's SSD
    output on the same tokens (``compare=True``: squared error, squared reference, per-channel sum of ``Y - Y'``).

    The comparison runs the float model beside the quantised one, so the error at layer ``k`` is everything the
    quantisation changed up to that SSD output (its own SSD, its projections, the earlier layers)."""

    def __init__(self, n_layers: int, *, observe: bool = False, compare: bool = False, keep: bool = False):
        self.observe, self.compare = observe, compare
        #: with ``keep``: per layer, the SSD's inputs of the last batch (x, dt, A, B, C, D) after the outlier scaling,
        #: and the projections' inputs (u into in_proj, g into out_proj)
        self.inputs: list[dict] | None = [{} for _ in range(n_layers)] if keep else None
        self.amax: list[dict] = [{} for _ in range(n_layers)]
        self.err, self.ref = torch.zeros(n_layers, dtype=torch.float64), torch.zeros(n_layers, dtype=torch.float64)
        self.diff: list[torch.Tensor | None] = [None] * n_layers
        self.count = 0

    def take_max(self, k: int, name: str, value: torch.Tensor) -> None:
        old = self.amax[k].get(name)
        self.amax[k][name] = value if old is None else torch.maximum(old, value)

    def add(self, k: int, y_ref: torch.Tensor, y: torch.Tensor) -> None:
        """``y_ref``, ``y``: ``(b, L, heads, headdim)``."""
        d = (y_ref - y).double()
        self.err[k] += float((d ** 2).sum())
        self.ref[k] += float((y_ref.double() ** 2).sum())
        s = d.sum((0, 1))  # (heads, headdim)
        self.diff[k] = s if self.diff[k] is None else self.diff[k] + s
        if k == 0:
            self.count += y.shape[0] * y.shape[1]

    @property
    def rel_error(self) -> torch.Tensor:
        """``(n_layers,)`` ``Σ|Y' - Y|² / Σ|Y|²``."""
        return self.err / self.ref.clamp_min(1e-300)


def _layer(block, lq: LayerQuant, h: torch.Tensor, variant: str, weights: str, chunk_size: int, decay_bits: int,
           backend: str, recorder: Recorder | None, k: int):
    """One residual Mamba-2 block: ``h`` ``(b, L, d)`` -> (the new ``h``, the SSD output ``(b, L, heads, headdim)``
    after the correction)."""
    mix = block.mixer
    lin_in, lin_out = lq.linears.get(weights, (None, None))
    u = block.norm(h)
    proj = mix.in_proj(u) if lin_in is None else lin_in(u, backend)
    z, xbc, dt = torch.split(proj, [mix.d_inner, mix.conv_dim, mix.nheads], dim=-1)
    xbc, _ = causal_conv(rearrange(xbc, "b l c -> b c l"), mix.conv, None)
    xbc = F.silu(rearrange(xbc, "b c l -> b l c"))
    gn = mix.ngroups * mix.d_state
    xs, B, C = torch.split(xbc, [mix.d_inner, gn, gn], dim=-1)
    x4 = rearrange(xs, "b l (h p) -> b l h p", p=mix.headdim) * lq.outlier  # the injected outlier channels
    B4, C4 = (rearrange(t, "b l (g n) -> b l g n", g=mix.ngroups) for t in (B, C))
    dt, A = F.softplus(dt + mix.dt_bias), -torch.exp(mix.A_log)
    if recorder is not None and recorder.inputs is not None:
        recorder.inputs[k] = {"x": x4, "dt": dt, "A": A, "B": B4, "C": C4, "D": mix.D, "u": u}
    y = ssd_variant(variant, x4, dt, A, B4, C4, mix.D, lq.scales, chunk_size, decay_bits=decay_bits,
                    backend=backend) / lq.outlier
    corr = lq.correction_for(variant, weights)
    if corr is not None:
        y = y + corr
    g = mix.norm(rearrange(y, "b l h p -> b l (h p)") * F.silu(z))
    if recorder is not None and recorder.inputs is not None:
        recorder.inputs[k]["g"] = g
    if recorder is not None and recorder.observe:
        for name, value in {**observe(x4, dt, A, B4, C4, chunk_size), "u": amax(u), "g": amax(g)}.items():
            recorder.take_max(k, name, value)
    return h + (mix.out_proj(g) if lin_out is None else lin_out(g, backend)), y


@torch.no_grad()
def forward(model: CausalLM, tokens: torch.Tensor, quant: list[LayerQuant], variant: str = "fp32",
            weights: str = "fp32", *, chunk_size: int, decay_bits: int = 7, backend: str = "int",
            recorder: Recorder | None = None, upto: int | None = None,
            reference: list[torch.Tensor] | None = None) -> torch.Tensor | None:
    """Logits ``(b, L, vocab)`` of ``model`` on ``tokens`` ``(b, L)`` with every Mamba-2 layer's SSD under ``variant``
    and its projections under ``weights``; the same function as ``model(tokens)`` for ``fp32``/``fp32``.

    ``upto``: stop after that layer and return None (fitting the corrections layer by layer). ``reference``: the
    float model's SSD outputs on these tokens (:func:`reference_outputs`), compared with a ``compare`` recorder in
    place of running the float model beside (the same values: the float model is the same computation each time).
    """
    h = model.embedding(tokens)
    compare = recorder is not None and recorder.compare
    h_ref = h if compare and reference is None else None
    for k, (block, lq) in enumerate(zip(model.stack.blocks, quant)):
        h, y = _layer(block, lq, h, variant, weights, chunk_size, decay_bits, backend, recorder, k)
        if h_ref is not None:
            h_ref, y_ref = _layer(block, lq, h_ref, "fp32", "fp32", chunk_size, decay_bits, backend, None, k)
            recorder.add(k, y_ref, y)
        elif compare:
            recorder.add(k, reference[k], y)
        if upto is not None and k == upto:
            return None
    return model.head(model.stack.norm(h))


def _batches(tokens: torch.Tensor, size: int = BATCH):
    for i in range(0, len(tokens), size):
        yield tokens[i: i + size]


@torch.no_grad()
def reference_outputs(model: CausalLM, tokens: torch.Tensor, quant: list[LayerQuant], *, chunk_size: int,
                      decay_bits: int = 7, backend: str = "int") -> list[torch.Tensor]:
    """The float model's SSD output ``(b, L, heads, headdim)`` per layer on ``tokens`` ``(b, L)`` (the outliers of
    ``quant`` injected and removed, as in the float pass beside a ``compare`` recorder, value for value)."""
    h, out = model.embedding(tokens), []
    for k, (block, lq) in enumerate(zip(model.stack.blocks, quant)):
        h, y = _layer(block, lq, h, "fp32", "fp32", chunk_size, decay_bits, backend, None, k)
        out.append(y)
    return out


@torch.no_grad()
def calibrate(model: CausalLM, calib: torch.Tensor, outliers: list[torch.Tensor], weight_bits=(8, 4), *,
              chunk_size: int, seed: int = 0) -> list[LayerQuant]:
    """Static scales from the float model on ``calib`` ``(n, L)`` (with the outliers injected): the SSD's
    axis-aware scales, the projections' INT8 input scales and their ``weight_bits`` weights."""
    quant = [LayerQuant(outlier=o) for o in outliers]
    rec = Recorder(len(quant), observe=True)
    for tokens in _batches(calib):
        forward(model, tokens, quant, chunk_size=chunk_size, recorder=rec)
    for k, (lq, block) in enumerate(zip(quant, model.stack.blocks)):
        lq.amax = rec.amax[k]
        lq.scales = SSDScales.from_amax(lq.amax)
        for bits in weight_bits:
            lq.linears[f"w{bits}a8"] = (QLinear.from_linear(block.mixer.in_proj, bits, lq.amax["u"]),
                                        QLinear.from_linear(block.mixer.out_proj, bits, lq.amax["g"]))
        n = lq.outlier.numel()
        lq.perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed * 1000 + k + 1))
    return quant


@torch.no_grad()
def fit_corrections(model: CausalLM, calib: torch.Tensor, quant: list[LayerQuant], weights: str, coef: float, *,
                    chunk_size: int, decay_bits: int = 7, backend: str = "int",
                    reference: list | None = None) -> list[torch.Tensor]:
    """SSDi8's error correction, layer by layer: with the earlier layers quantised and corrected, layer ``k``'s
    ``c*_p = mean over calibration positions of (Y - Y')_p`` (the float model's SSD output minus the quantised
    model's, same tokens), stored as ``coef · c*`` in ``quant[k].correction[weights]``. Returns the unscaled ``c*``
    per layer, ``(heads, headdim)`` each. ``reference``: per batch of ``calib``, the float model's SSD outputs
    (:func:`reference_outputs`; None: the float model runs beside each pass)."""
    out = []
    for k, lq in enumerate(quant):
        lq.correction[weights] = torch.zeros_like(lq.outlier)
        rec = Recorder(len(quant), compare=True)
        for b, tokens in enumerate(_batches(calib)):
            forward(model, tokens, quant, "ssdi8", weights, chunk_size=chunk_size, decay_bits=decay_bits,
                    backend=backend, recorder=rec, upto=k, reference=None if reference is None else reference[b])
        c_star = (rec.diff[k] / rec.count).float()
        lq.correction[weights] = coef * c_star
        out.append(c_star)
    return out


def with_corrections(quant: list[LayerQuant], corrections: dict[str, list[torch.Tensor]]) -> list[LayerQuant]:
    """Copies of ``quant`` whose corrections are ``corrections[weights][layer]`` (scales and weights shared)."""
    return [replace(lq, correction={w: c[k] for w, c in corrections.items()}) for k, lq in enumerate(quant)]


def quantise(model: CausalLM, calib: torch.Tensor, *, outlier_channels: int, outlier_scale: float,
             weight_bits=(8, 4), coef: float = 0.15, chunk_size: int, decay_bits: int = 7, seed: int = 0,
             backend: str = "int", fit: tuple[str, ...] | None = None
             ) -> tuple[list[LayerQuant], dict[str, list[torch.Tensor]]]:
    """Everything SSDi8 does before deployment: inject the outlier channels (layer ``k``'s drawn from
    ``seed * 1000 + k``), calibrate on ``calib`` ``(n, L)``, and fit the corrections for every weight setting (only
    those named in ``fit`` when given: each setting's corrections are fitted apart, so the others do not change).

    Returns:
        the per-layer :class:`LayerQuant` and, per weight setting, the unscaled ``c*`` of each layer.
    """
    outliers = []
    for k, block in enumerate(model.stack.blocks):
        mix = block.mixer
        v = outlier_vector(mix.d_inner, outlier_channels, outlier_scale, seed * 1000 + k)
        outliers.append(v.reshape(mix.nheads, mix.headdim))
    quant = calibrate(model, calib, outliers, weight_bits, chunk_size=chunk_size, seed=seed)
    kw = dict(chunk_size=chunk_size, decay_bits=decay_bits, backend=backend)
    reference = [reference_outputs(model, tokens, quant, **kw) for tokens in _batches(calib)]  # once for all fits
    c_star = {w: fit_corrections(model, calib, quant, w, coef, reference=reference, **kw)
              for w in ("fp32", *(f"w{b}a8" for b in weight_bits)) if fit is None or w in fit}
    return quant, c_star


@torch.no_grad()
def evaluate(model: CausalLM, tokens: torch.Tensor, quant: list[LayerQuant], variant: str, weights: str, *,
             chunk_size: int, decay_bits: int = 7, backend: str = "int", per_sequence: list | None = None,
             compare: bool = True, reference: list | None = None) -> tuple[float, torch.Tensor | None]:
    """Next-character loss (nats, mean over positions) on ``tokens`` ``(n, L + 1)`` and the relative SSD output
    error per layer ``(n_layers,)`` against the float model (None without ``compare``, which skips the float
    model's reference pass); ``per_sequence``, if a list, is extended by each sequence's mean loss (the paired
    evaluation noise between variants). ``reference``: a list that holds, per batch, the float model's SSD outputs
    on these tokens (:func:`reference_outputs`) when it is not empty, and is filled when it is, so that
    evaluations of the same tokens (and outliers) compute the float reference once."""
    rec = Recorder(len(quant), compare=True) if compare else None
    kw = dict(chunk_size=chunk_size, decay_bits=decay_bits, backend=backend)
    fill = compare and reference is not None and not reference
    total, count = 0.0, 0
    for b, seq in enumerate(_batches(tokens)):
        ref = None
        if compare and reference is not None:
            if fill:
                reference.append(reference_outputs(model, seq[:, :-1], quant, **kw))
            ref = reference[b]
        logits = forward(model, seq[:, :-1], quant, variant, weights, recorder=rec, reference=ref, **kw)
        ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), seq[:, 1:].reshape(-1), reduction="none")
        total += float(ce.sum())
        count += seq[:, 1:].numel()
        if per_sequence is not None:
            per_sequence.extend(ce.reshape(len(seq), -1).mean(1).tolist())
    return total / count, (rec.rel_error if rec is not None else None)
