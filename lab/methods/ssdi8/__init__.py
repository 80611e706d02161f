r"""SSDi8: post-training INT8 quantisation of Mamba-2's state space duality (SSD).

Paper: "SSDi8: Accurate and Efficient 8-bit Quantization for State Space Duality" (OpenReview pjMDZJd4rT, ICLR 2026;
official code cau-hai-lab/SSDi8, a fork of Quamba). Facts marked [secondary] come from the research notes, not from
the paper itself, and are unverified.

**Idea.** Mamba-2 computes its selective SSM in chunks of ``q`` positions with matrix products (the SSD). Earlier
quantisers of Mamba (Quamba, Quamba2) quantise only the SSM's *inputs* with one scale per tensor and run the scan in
half precision. SSDi8 keeps the whole SSD path in INT8: it takes the element-wise factors (the step sizes ``Δ`` and
the decays ``exp(ΔA)``) out of the matrix products, so the quantised activations are quantised once and reused by
every product; it gives each tensor scales along the axes its range varies on (``x`` per chunk, head and head
dimension; ``B`` and ``C`` per group; separate scales for ``C·Bᵀ`` and for the states); it applies the decay in the
state passing as a fixed-point multiply (a shift); and it adds a per-channel error correction fitted on calibration
data. The paper reports accuracy close to FP16 at W8A8 and W4A8 and up to 1.4x faster SSD kernels on GPUs.

**Equations.** Per head, ``h_t = exp(Δ_t A) h_{t-1} + Δ_t x_t B_tᵀ``, ``y_t = h_t C_t + D x_t``. With
``a_t = cumsum(Δ A)`` inside a chunk, ``L_ij = exp(a_i - a_j)`` (``i >= j``):

    Y_diag = (L ∘ C Bᵀ) (Δ ∘ x)                    S_c = Σ_t exp(a_end - a_t) Δ_t x_t B_tᵀ
    S_{c+1} = exp(a_end) S_c + S_c'                Y_off = exp(a_i) C_i S_cᵀ           y = Y_diag + Y_off + D x

SSDi8 [secondary, from the upstream code]: ``S_c' = Q(x̃)ᵀ Q(B)`` with ``x̃ = (Δ ∘ exp(a_end - a)) ∘ x`` quantised
after the element-wise factors; ``C Bᵀ = Q(C) Q(B)ᵀ`` and ``Y_off`` in INT8 with int32 accumulation; ``Y_diag`` and
the cumulative sums in floating point. The state passing, read in khw980/SSDi8's ``quant_state_passing``: the chunk
states requantised to INT8 on the states' scale (per head and headdim), ``S_{c+1} = ((S_c g_c + 2^6) >> 7) + S_c'``
in int32 with the gate ``g_c = clamp(⌊exp(a_end) 2^7⌉, -127, 127)`` (an int8 code), the states stored as INT8
clamped to ±127.
Error correction: ``c*_p = (1/N) Σ_i (Y - Y')_{i,p}``, the mean over calibration samples of the float output minus
the quantised one per channel ``p``, fitted layer by layer and added to the SSD output times a coefficient (0.15 in
the paper's summary; 0.16 in the repository's scripts, 0.1 as the code's default) [secondary].

Numbers [secondary]: Mamba2-8B WikiText2 perplexity at W8A8: Quamba2 7.79, SSDi8 7.49, FP16 7.25; at W4A8 7.94 /
7.62; Mamba2-2.7B zero-shot average at W8A8 62.5 / 63.2 / 63.8; end-to-end 1.47x over FP16 on a GPU.

**In this lab.** A 2-layer Mamba-2 character model (``lab.core``'s ``CausalLM``) trained on Python's standard-
library sources (:mod:`.train`); :mod:`.quant` (quantisers, ``torch._int_mm`` products beside their fake-quant twin,
W8A8/W4A8 projections); :mod:`.model` (the INT8 SSD on the stages of ``kernels.ssd``, and the baselines);
:mod:`.lm` (the model run through any variant, outlier injection, calibration, the correction);
:mod:`.measure` (each seed's measurements, with the trainings laid out over the cores), :mod:`.experiment`,
:mod:`.claims`, :mod:`.stats` (margin, clustered bound), :mod:`.plots`, :mod:`.live`;
notebook ``10_ssdi8.ipynb``. A tiny model trained for a minute has no outlier channels of its own, so
function-preserving ones are injected (the SSD input's channel
``p`` scaled up, its output scaled back down) to make a per-tensor scale fail as it does in large models (the
method's planned regime). There the headline compares SSDi8 at W8A8 with the strongest input-only quantiser (x per
channel, B and C per group, the SSD after them in float) as a non-inferiority test with the paper's tolerance as
margin (1.64% relative loss: SSDi8's W8A8 distance to FP16 on Mamba2-8B, fixed before the run), on 1024 evaluation
sequences from about 70 files (the standard error clustered by file) and on each of three trained models; one scale
per tensor, the control, must fail it. The same test on the model's own activations (4 groups of B and C, so
per-group and per-tensor scales differ) was the headline first; it does not discriminate at this scale (every INT8
choice moves the loss by under 0.2%, per tensor passes too) and is a report row, the headline moved to the
injected outliers after that. On a CPU
the INT8 path's speed and memory are measured and reported as they are; the paper's GPU speed-up is not claimed.
"""

from lab.registry import Method

METHOD = Method.here(__name__,
                     title="SSDi8: Accurate and Efficient 8-bit Quantization for State Space Duality",
                     paper="OpenReview:pjMDZJd4rT",
                     summary="INT8 through Mamba-2's SSD: axis-aware scales, decays outside the int8 products, "
                             "fixed-point state passing, a per-channel error correction.")

__all__ = ["METHOD"]
