"""SSDi8's claims, each read from the run's Dataset alone.

Accuracy claims compare evaluation losses of the same trained model under different quantisations (the evaluation set
is disjoint from the calibration and training files); the headline repeats its comparison on n_seeds trained models,
since SSDi8's difference from the input-only quantisers changes sign from one model to the next. Their
controls are the same measurement on a variant without the claimed property: one scale per tensor in place of the
axis-aware ones; the correction's values put on the wrong channels in place of the fitted correction. The controls
are quantisations of the same model (no learned part of their own); what must have learned its task is the float
model every claim compares against: its competence check holds it to a bigram count model of its own training
split, on the same evaluation files.

Two settings: the model with injected, function-preserving outlier channels (a stand-in for a large model's
outliers: per-tensor scales fail there through those channels) and the model's own activations (the paper's
reason, channel-varying activations, as this small model has them). The headline is the paper's W8A8 result as a
non-inferiority test against the strongest input-only quantiser, in the injected-outlier regime (the method's planned
one: outlier channels are what large Mamba models have and what per-tensor scales fail on): the margin (1.64%
relative loss, the paper's W8A8 distance of SSDi8 to FP16 on Mamba2-8B) was fixed before the run, and the upper
confidence bound uses a standard error clustered by evaluation file (the 1024 windows come from ~70 files and are
not independent). That regime was made the headline's after the same test on the model's own activations did not
discriminate (every INT8 choice moves this small model's loss by under 0.2%): that test stays as a report row. The
CPU speed and memory of the INT8 path are report rows: measured on this machine, no GPU figure claimed.
"""

from __future__ import annotations

import math

import numpy as np
import xarray as xr

from lab.claims import Claim, Competence, Measurement, over_seeds
from lab.methods.ssdi8.stats import CONFIDENCE, MARGIN, PAPER_W8A8_PPL, clustered_difference, excess_bounds

__all__ = ["CLAIMS", "CONFIDENCE", "MARGIN", "PAPER_W8A8_PPL", "clustered_difference", "correction_ceiling"]


def _value(ds: xr.Dataset, var: str, variant: str, weights: str, own: bool = False) -> float:
    """Loss or perplexity of ``variant`` at ``weights``: with the injected outliers, or on the model's own
    activations (``own``)."""
    loss = float((ds.loss_own if own else ds.loss).sel(variant=variant, weights=weights))
    return math.exp(loss) if var == "perplexity" else loss


def _rise(ds: xr.Dataset, variant: str, weights: str, var: str = "loss", own: bool = False) -> float:
    """Relative rise (%) of ``var`` of ``variant`` at ``weights`` over the float model."""
    return 100.0 * (_value(ds, var, variant, weights, own) / _value(ds, var, "fp32", "fp32", own) - 1.0)


def _loss_rise(variant: str, weights: str, var: str = "loss", own: bool = False):
    def measure(ds: xr.Dataset) -> Measurement:
        fp = _value(ds, "perplexity", "fp32", "fp32", own)
        ppl = _value(ds, "perplexity", variant, weights, own)
        loss = _value(ds, "loss", variant, weights, own)
        where = "own activations" if own else f"{ds.attrs['outlier_channels']} injected outlier channels"
        detail = (f"{variant} at {weights}, {where}: loss {loss:.4f} nats/char, perplexity {ppl:.3f} vs FP32 "
                  f"{fp:.3f}")
        if variant == "per_tensor" and not own and "loss_own" in ds:
            without = _rise(ds, variant, weights, var, own=True)
            detail += f"; without the injected outliers per-tensor rises {without:.3f}%"
        return Measurement(_rise(ds, variant, weights, var, own), detail)

    return measure


def _excess_bound(variant: str, statistic: str, outliers: bool):
    """Non-inferiority: per trained model, the upper one-sided 95% bound (clustered by file) of ``variant``'s
    relative loss excess (%) over the strongest input-only quantiser, at W8A8 with the injected outlier channels
    (``outliers``) or on the model's own activations; over the seeds, the ``statistic`` (``max``: the worst seed for
    the method; ``min``: the control's seed nearest to passing)."""

    def measure(ds: xr.Dataset) -> Measurement:
        seq = ds.seq_loss_seeds_outliers if outliers else ds.seq_loss_seeds
        bounds, parts = excess_bounds(seq, ds.eval_file.values, variant)
        where = f"{ds.attrs['outlier_channels']} injected outlier channels" if outliers else "own activations"
        return over_seeds(bounds, statistic,
                          f"{variant} at w8a8, {where}, loss over the strongest input-only quantiser, "
                          f"{ds.sizes['eval_seq']} evaluation sequences from {len(np.unique(ds.eval_file))} files "
                          f"(standard error clustered by file, one-sided {CONFIDENCE:.0%} bound): " + "; ".join(parts)
                          + f" (the {statistic} over seeds; margin {MARGIN:.2f}%)")

    return measure


def _part_cost(ds: xr.Dataset) -> Measurement:
    """Inside SSDi8 at W8A8 on the model's own activations: how many standard errors the loss rises when B and C
    get one scale per tensor in place of one per group (the other parts, one at a time, in the detail)."""
    ref = ds.seq_loss_own.sel(variant="ssdi8", weights="w8a8").values
    z = {str(p): clustered_difference(ds.seq_loss_part.sel(part=p).values, ref, ds.eval_file.values)
         for p in ds.part.values}
    parts = "; ".join(f"{p.replace('_', ', ')} {d.mean:+.1e} ± {d.se:.0e} ({d.z:+.1f} SE)" for p, d in z.items())
    return Measurement(z["B_C"].z, f"one part per tensor inside SSDi8 at w8a8, loss difference to SSDi8 over "
                                   f"{len(ref)} evaluation sequences (standard error clustered by file): {parts}")


def correction_ceiling(coef: float) -> float:
    """The largest drop (%) of the squared SSD output error that adding ``coef`` times the per-channel mean error
    can give: 100 (1 - (1 - coef)²), reached only when all the error is a per-channel bias (27.75% at 0.15)."""
    return 100.0 * (1.0 - (1.0 - coef) ** 2)


def _error_drop(variant: str):
    """The drop of the SSD output error (mean over layers) as a share of the ceiling the coefficient allows."""

    def measure(ds: xr.Dataset) -> Measurement:
        w, coef = ds.attrs["correction_weights"], float(ds.attrs["correction_scale"])
        ceiling = correction_ceiling(coef)
        if not 0.0 < coef < 2.0:
            raise ValueError(f"correction coefficient {coef:g}: a drop of at most {ceiling:.1f}% leaves no claim")
        base = ds.ssd_error.sel(variant="axis_aware", weights=w)
        err = ds.ssd_error.sel(variant=variant, weights=w)
        drop = 100.0 * (1.0 - err / base)
        full = 100.0 * (1.0 - ds.ssd_error_full_correction.sel(weights=w) / base)
        return Measurement(100.0 * float(drop.mean()) / ceiling,
                           f"{variant} at {w}, coefficient {coef:g}: error drop per layer "
                           f"{', '.join(f'{v:.1f}%' for v in drop.values)} of at most {ceiling:.2f}% (error "
                           f"{', '.join(f'{v:.2e}' for v in err.values)}); the whole mean (coefficient 1): "
                           f"{', '.join(f'{v:.1f}%' for v in full.values)}")

    return measure


def _float_vs_bigram(ds: xr.Dataset) -> Measurement:
    # the float model's loss over the same sequences as the count models' (all n_eval: the own-activation grid)
    fp = float((ds.loss_own if "loss_own" in ds else ds.loss).sel(variant="fp32", weights="fp32"))
    bigram = float(ds.bigram_loss)
    return Measurement(fp / bigram, f"float model {fp:.4f} nats/char vs bigram {bigram:.4f}, unigram "
                                    f"{float(ds.unigram_loss):.4f} (final training loss "
                                    f"{ds.attrs['train_final_loss']:.4f})")


#: every accuracy claim compares against the trained float model: it must have learned its corpus
FLOAT_MODEL_LEARNED = Competence(
    label="the trained float model, evaluation loss over a bigram count model's on the same files",
    measure=_float_vs_bigram,
    op="<",
    threshold=1.0,
    threshold_source="a character model that learned its corpus predicts held-out files better than character-pair "
                     "counts of its own training split (add-one smoothed); one that did not is no baseline to keep "
                     "within 1% of",
    unit="x bigram loss",
)

def _damage_ratio(ds: xr.Dataset) -> Measurement:
    per, axis = _rise(ds, "per_tensor", "fp32"), _rise(ds, "axis_aware", "fp32")
    err = ds.ssd_error.sel(weights="fp32").mean("layer")
    ratio = float(err.sel(variant="per_tensor") / err.sel(variant="axis_aware"))
    return Measurement(ratio, f"SSD output error per-tensor {float(err.sel(variant='per_tensor')):.2e} vs axis-aware "
                              f"{float(err.sel(variant='axis_aware')):.2e}; loss rise {per:.3f}% vs {axis:.4f}% "
                              "(projections float)")


def _quamba(ds: xr.Dataset) -> Measurement:
    w = "w8a8" if "w8a8" in ds.weights.values else "fp32"
    ppl = {v: float(ds.perplexity.sel(variant=v, weights=w)) for v in ("input_only", "input_group", "ssdi8")}
    return Measurement(ppl["input_only"] / ppl["ssdi8"],
                       f"perplexity at {w}, injected outliers: input-only per tensor (Quamba-style) "
                       f"{ppl['input_only']:.3f}, per channel and group (Quamba2-style) {ppl['input_group']:.3f}, "
                       f"SSDi8 {ppl['ssdi8']:.3f}")


def _twin(part: str):
    """INT8 path vs fake-quant twin: ``codes`` (of every SSD), ``ssd`` (SSD and projections), ``logits``."""
    def measure(ds: xr.Dataset) -> Measurement:
        at = f"SSDi8 at {ds.attrs['twin_weights']}"
        if part == "codes":
            differ, total = ds.twin_codes_differ.values, ds.twin_codes.values
            return Measurement(float(differ.sum()), f"{int(differ.sum())} of {int(total.sum())} codes differ over "
                                                    f"{len(total)} layers ({at}, the fake-quant forward's inputs)")
        if part == "ssd":
            d, p = ds.twin_ssd_difference.values, ds.twin_proj_difference.values
            return Measurement(float(np.fmax(d, p).max()), f"{at}: Numba SSD kernels and torch._int_mm projections "
                                                          "vs float32 products of the same codes; per layer SSD "
                               + ", ".join(f"{v:.1e}" for v in d) + ", projections "
                               + ", ".join(f"{v:.1e}" for v in p))
        return Measurement(float(ds.twin_difference), f"{at}: int32 products (Numba SSD kernels, torch._int_mm "
                                                      "projections) vs float32 products of the same codes")
    return measure


def _speed(ds: xr.Dataset) -> Measurement:
    t = ds.cpu_time
    r = {op: float(t.sel(op=op, impl="int8") / t.sel(op=op, impl="fp32")) for op in t.op.values}
    ms = lambda op, impl: 1e3 * float(t.sel(op=op, impl=impl))  # noqa: E731
    return Measurement(r["ssd"], f"SSD {ms('ssd', 'int8'):.1f} ms int8 vs {ms('ssd', 'fp32'):.1f} ms fp32 "
                                 f"(fake-quant {ms('ssd', 'fake_quant'):.1f}); in_proj x{r['in_proj']:.2f}; "
                                 f"whole model x{r['model']:.2f}; {ds.attrs['threads']} thread(s), load "
                                 f"{ds.attrs['load_before']:.1f} on {ds.attrs['cpu_count']} CPUs")


def _memory(ds: xr.Dataset) -> Measurement:
    b = ds.ssd_bytes
    w = ds.weight_bytes
    parts = ", ".join(f"{str(k)} {float(w.sel(weights=k)) / 1e3:.0f} kB" for k in w.weights.values)
    kb = {p: float(b.sel(path=p)) / 1e3 for p in ("int8", "fp32")}
    return Measurement(float(b.sel(path="int8") / b.sel(path="fp32")),
                       f"SSD stages {kb['int8']:.0f} kB int8 vs {kb['fp32']:.0f} kB fp32 (chunk states and passed "
                       f"states int8, as upstream); projections {parts}")


CLAIMS = [
    Claim(
        name="ssd_int8_close_to_fp32",
        statement="INT8 through the whole SSD with axis-aware scales and the correction stays within 1% of the "
                  "FP32 loss (weights float); one scale per tensor does not",
        source="paper: SSDi8 accuracy comparable to FP16; W8A8 Mamba2-8B perplexity 7.49 vs 7.25 [secondary]",
        measure=_loss_rise("ssdi8", "fp32"),
        op="<=",
        threshold=1.0,
        threshold_source="the lab's plan: axis-aware + correction within 1% relative of the FP32 loss",
        unit="% loss rise",
        control=_loss_rise("per_tensor", "fp32"),
        control_label="the same INT8 SSD with one scale per tensor (x, B, C, CB, states), must rise by more; with "
                      "two injected outlier channels x20 per layer it fails through those channels (an artefact "
                      "standing in for a large model's outliers; the detail gives the rise without them)",
        competence=FLOAT_MODEL_LEARNED,
    ),
    Claim(
        name="w8a8_close_to_fp32",
        statement="W8A8 (INT8 projections and SSD) stays within the paper's W8A8 perplexity gap of FP32; per-tensor "
                  "SSD scales do not",
        source="paper (via notes): Mamba2-8B WikiText2 W8A8 7.49 vs FP16 7.25 [secondary]",
        measure=_loss_rise("ssdi8", "w8a8", "perplexity"),
        op="<=",
        threshold=3.3,
        threshold_source="the paper's W8A8 gap: 7.49 / 7.25 - 1 = 3.3% perplexity [secondary]",
        unit="% perplexity rise",
        control=_loss_rise("per_tensor", "w8a8", "perplexity"),
        control_label="W8A8 with one scale per tensor in the SSD; it fails through the two injected outlier "
                      "channels x20 per layer (an artefact standing in for a large model's outliers; the detail "
                      "gives the rise without them)",
        competence=FLOAT_MODEL_LEARNED,
    ),
    Claim(
        name="w8a8_int8_ssd_matches_input_only",
        statement="With outlier channels (the lab's function-preserving injected ones, the method's planned "
                  "regime), W8A8 with the whole SSD in INT8 (SSDi8: axis-aware scales, integer state passing, "
                  "correction) is non-inferior to the strongest input-only quantiser, which keeps the SSD after its "
                  "inputs in float: on every trained model the upper one-sided 95% bound of its relative loss excess "
                  f"(standard error clustered by source file) stays below the paper's tolerance {MARGIN:.2f}%; with "
                  "one scale per tensor the INT8 SSD does not, on any",
        source="paper: INT8 through the whole SSD at accuracy comparable to FP16 and above Quamba2 (input "
               "quantisation, float SSD); Mamba2-8B W8A8 perplexity 7.49 vs Quamba2 7.79, FP16 7.25 [secondary]; "
               "outlier channels, which large Mamba models have, are why the scales must follow the axes",
        measure=_excess_bound("ssdi8", "max", outliers=True),
        op="<",
        threshold=MARGIN,
        threshold_source="non-inferiority margin fixed from the paper before the run: the loss increase the paper "
                         "calls comparable to FP16, SSDi8's W8A8 WikiText2 perplexity over FP16's on Mamba2-8B as "
                         "relative loss, ln 7.49 / ln 7.25 - 1 = 1.64% [secondary]; the bound: mean excess + "
                         "t(0.95, files - 1) x its standard error clustered by evaluation file; on every trained "
                         "model (the worst seed). The regime (2 channels x20 per layer, set when the method was "
                         "built) was made the headline's after the same test on the model's own activations did not "
                         "discriminate (the row below)",
        unit="% loss (upper bound)",
        control=_excess_bound("per_tensor", "min", outliers=True),
        control_label="the same INT8 SSD with one scale per tensor (x, B, C, CB, states), same weights, activations "
                      "and outlier channels, held to the same margin: it must not be shown non-inferior on any seed "
                      "(the least bound over seeds at or above the margin)",
        competence=FLOAT_MODEL_LEARNED,
        headline=True,
    ),
    Claim(
        name="w8a8_own_int8_ssd_matches_input_only",
        statement="The same non-inferiority test on the model's own activations (no injected outliers): it does "
                  "not discriminate at this scale (no activation outliers; every INT8 choice moves the loss by "
                  "under 0.2%, so per tensor passes the margin too): shown, no verdict",
        source="paper: INT8 through the whole SSD at accuracy comparable to FP16 and above Quamba2 [secondary]",
        measure=_excess_bound("ssdi8", "max", outliers=False),
        op="<",
        threshold=MARGIN,
        threshold_source="the headline's margin and bound (ln 7.49 / ln 7.25 - 1 = 1.64%, clustered by file, the "
                         "worst seed); the headline until the control was seen to pass it as well",
        unit="% loss (upper bound)",
        control=_excess_bound("per_tensor", "min", outliers=False),
        control_label="one scale per tensor in the INT8 SSD, own activations (the least bound over seeds)",
        competence=FLOAT_MODEL_LEARNED,
        report=True,
    ),
    Claim(
        name="w8a8_own_activations_close_to_fp32",
        statement="On the model's own activations, W8A8 with SSDi8: perplexity rise over FP32, beside the paper's "
                  "W8A8 gap (every W8A8 variant of this small model stays inside that gap: no verdict)",
        source="paper (via notes): Mamba2-8B WikiText2 W8A8 7.49 vs FP16 7.25 [secondary]",
        measure=_loss_rise("ssdi8", "w8a8", "perplexity", own=True),
        op="<=",
        threshold=3.3,
        threshold_source="the paper's W8A8 gap: 7.49 / 7.25 - 1 = 3.3% perplexity [secondary]; shown, no verdict",
        unit="% perplexity rise",
        report=True,
    ),
    Claim(
        name="per_group_B_C_matters",
        statement="Inside SSDi8 at W8A8 on the model's own activations, one scale per tensor for B and C in place of "
                  "one per group: its loss above SSDi8's in paired standard errors clustered by evaluation file (x, "
                  "C·Bᵀ and the states per tensor, one at a time, in the detail)",
        source="paper: axis-aware scales, B and C per group",
        measure=_part_cost,
        op=">=",
        threshold=2.0,
        threshold_source="shown, no verdict (2 standard errors, the ~95% convention): which of the per-tensor "
                         "control's scales the loss can see on this model's own activations",
        unit="standard errors",
        report=True,
    ),
    Claim(
        name="correction_lowers_error",
        statement="The per-channel error correction lowers the SSD output error (mean over layers, at the lowest "
                  "weight bits run), as a share of the most that its coefficient can remove",
        source="paper: the error-correction term from calibration statistics",
        measure=_error_drop("ssdi8"),
        op=">",
        threshold=0.0,
        threshold_source="theory: adding c times the calibration mean error b̂ changes the held-out squared error by "
                         "-(2c<b̂, b> - c²|b̂|²) (b the held-out mean error): it drops only if the calibration bias "
                         "carries over to held-out text, and a b̂ that does not carry over raises the error. The "
                         "lab's earlier bar (a drop of 20% of the ceiling, i.e. a per-channel bias >= 20% of the "
                         "error) is not from the paper; the bias share measured here is the coefficient-1 drop in "
                         "the detail",
        unit="% of the ceiling",
        control=_error_drop("shuffled"),
        control_label="the same correction values assigned to permuted channels",
        competence=FLOAT_MODEL_LEARNED,
    ),
    Claim(
        name="int8_codes_equal_fake_quant",
        statement="On the trained model's own activations, the INT8 SSD (int8 operands, int32 accumulation in Numba "
                  "kernels) forms every int8 code its fake-quant twin forms (x, B, C, CB, chunk states, passed "
                  "states; each layer on the same inputs): the number of codes that differ",
        source="this lab's implementation check (the paper's kernels are Triton/CUDA)",
        measure=_twin("codes"),
        op="<",
        threshold=1.0,
        threshold_source="bit for bit: the same float32 operations in the same order, exact int32 sums",
        unit="codes",
        no_control="two implementations of the same arithmetic must agree; there is no variant without the property",
    ),
    Claim(
        name="int8_equals_fake_quant",
        statement="The INT8 path computes what its fake-quant twin computes: each layer's SSD, in_proj and "
                  "out_proj on the same inputs, the worst one's max difference relative to its largest output",
        source="this lab's implementation check (the paper's kernels are Triton/CUDA)",
        measure=_twin("ssd"),
        op="<",
        threshold=1e-4,
        threshold_source="float32 rounding of the fused tail (the codes and int32 sums are exact); our convention",
        unit="relative",
        no_control="two implementations of the same arithmetic must agree; there is no variant without the property",
    ),
    Claim(
        name="int8_logits_vs_fake_quant",
        statement="The whole model's logits, INT8 path against its fake-quant twin: the float tails' rounding moves "
                  "the next layer's inputs, a code on a rounding boundary flips, and it compounds over layers",
        source="this lab's implementation check",
        measure=_twin("logits"),
        op="<",
        threshold=1e-4,
        threshold_source="report row: a code flipped in a later layer moves them far more (0.0027 once, a Zen 4)",
        unit="relative",
        report=True,
    ),
    Claim(
        name="per_tensor_damage_ratio",
        statement="Per-tensor INT8 of the SSD does many times more damage than axis-aware INT8: the ratio of their "
                  "SSD output errors (the loss rises are in the detail)",
        source="the lab's plan: per-tensor raises the loss >= 5x as much as axis-aware",
        measure=_damage_ratio,
        op=">=",
        threshold=5.0,
        threshold_source="the lab's 5x, shown as a row: the axis-aware loss rise is within evaluation noise "
                         "of zero (it can be negative), so the ratio is taken of the output errors",
        unit="x",
        report=True,
    ),
    Claim(
        name="w4a8_rise",
        statement="W4A8 with SSDi8: perplexity rise over FP32",
        source="paper (via notes): Mamba2-8B W4A8 7.62 vs FP16 7.25, +5.1% [secondary]",
        measure=_loss_rise("ssdi8", "w4a8", "perplexity"),
        op="<=",
        threshold=5.1,
        threshold_source="shown beside the paper's W4A8 gap, no verdict",
        unit="% perplexity rise",
        report=True,
    ),
    Claim(
        name="beats_input_only",
        statement="SSDi8 against Quamba-style input-only quantisation (x, B, C per tensor at the SSD's entry): "
                  "perplexity ratio input-only / SSDi8",
        source="paper (via notes): Mamba2-8B W8A8 Quamba2 7.79 vs SSDi8 7.49 [secondary]",
        measure=_quamba,
        op=">",
        threshold=1.0,
        threshold_source="shown beside the paper's ratio 1.04, no verdict (our input-only baseline has no "
                         "percentile clipping or Hadamard rotation)",
        unit="x",
        report=True,
    ),
    Claim(
        name="cpu_speed",
        statement="CPU wall time of the INT8 SSD relative to the float32 SSD (same stages, same batch)",
        source="paper: up to 1.4x SSD speed-up on GPUs (not claimed on the CPU)",
        measure=_speed,
        op="<",
        threshold=1.0,
        threshold_source="measured and reported as it is, no verdict",
        unit="x fp32 time",
        report=True,
    ),
    Claim(
        name="cpu_memory",
        statement="Bytes held between the SSD's stages on the INT8 path relative to float32",
        source="paper: INT8 activations through the SSD",
        measure=_memory,
        op="<",
        threshold=1.0,
        threshold_source="measured and reported as it is, no verdict",
        unit="x fp32 bytes",
        report=True,
    ),
]
