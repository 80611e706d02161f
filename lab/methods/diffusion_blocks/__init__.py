r"""DiffusionBlocks: train a residual network one block at a time, each block a denoiser of its own noise range.

Paper: Shing, Koyama & Akiba, "DiffusionBlocks: Block-wise Neural Network Training via Diffusion Interpretation"
(arXiv 2506.14202, ICLR 2026).

**Idea.** A residual network updates its state a little per layer, ``h ← h + f(h)``, like the steps of an ODE. Read
those steps as the Euler steps of a diffusion model's probability-flow ODE and each group of layers becomes a
denoiser for one stretch of noise levels. Cut the L layers into B blocks, give block ``b`` the noise range
``[σ_{b+1}, σ_b]``, and train every block on its own with the denoising score-matching loss: a step picks one block,
so only that block's activations and gradients are ever held, a B-fold memory saving, and no gradient crosses a
block boundary. At inference the blocks run in order, each taking the Euler steps whose σ lies in its range.

**Noise ranges.** EDM trains on ``ln σ ~ N(P_mean, P_std²)`` (``P_mean = -1.2``, ``P_std = 1.2``) over
``σ ∈ [0.002, 80]``. The ranges hold equal probability mass under it, so every block gets an equal share of the
training signal where the loss is hardest:

    q_b = q_min + (b/B)(q_max - q_min),    σ_b = exp(P_mean + P_std Φ⁻¹(q_b)),

with ``q_min, q_max`` the log-normal CDF at ``σ_min, σ_max``; each training range is widened by
``(σ_b / σ_{b+1})^γ`` (``γ = 0.05``) on both sides so neighbours agree at their common edge. The ablation's
baseline cuts ``ln σ`` into equal widths.

**Denoiser (EDM).** ``D(z, σ) = c_skip z + c_out F(c_in z, c_noise)`` with ``c_skip = σ_d²/(σ² + σ_d²)``,
``c_out = σ σ_d/√(σ² + σ_d²)``, ``c_in = 1/√(σ² + σ_d²)``, ``c_noise = ln(σ)/4``, ``σ_d = 0.5``; the loss
``λ(σ) ‖D(y + σ ε, σ) - y‖²`` with ``λ(σ) = (σ² + σ_d²)/(σ σ_d)²``, σ drawn from the log-normal restricted to the
block's range. Every layer is conditioned on the noise by AdaLN: ``LN(h)(1 + s) + t`` and a gate ``g`` on the
residual branch, ``(s, t, g)`` linear in an embedding of ``c_noise`` (zero-initialised, so a layer starts as the
identity).

**Sampling.** ``z_0 = σ_max ε``; for EDM's levels ``σ_0 > ... > σ_{N-1}`` and ``σ_N = 0``:
``z ← z + (σ_{i+1} - σ_i)/σ_i · (z - D_{b(σ_i)}(z, σ_i))``, where ``b(σ)`` is the block that owns ``σ``.

**Classification** (the reference implementation). The target is a label's embedding (learned, one table, unit norm
as the reference's F.normalize, of the model's width); block b denoises it given the input's tokens and is trained by
the cross-entropy of its logits, weighted by ``w(σ)``. As the reference, the blocks share a stem (token embedding,
positions, query token, noise embedder, final norm, the class table and a noise-modulated linear head on ``D =
c_skip z + c_out LN(h)``) and each owns only its transformer layers. Inference: ``z = √(1 + σ_max²) ε``, then one
level per block evenly spaced in the log-normal's CDF from σ_max to σ_min; at each the owning block gives the logits
and the Euler step uses the class posterior's mean embedding ``softmax(logits) E``. One such chain samples a class
from the blocks' predictive distribution; we average the class probabilities at σ_min over ``n_chains`` chains and
take the argmax, as the end-to-end networks are read. Ours, measured against the reference's choices (MNIST-1D,
quick): the noisy label is mapped linearly into every layer's AdaLN condition beside σ (the reference feeds it as the
class token; as a token of its own it costs a token more of memory per step; added to the query token it scored
lower, 76.1/77.8% on seeds 0-1), and the classifier's blocks cut ``ln σ`` uniformly: the first block owns [2.3, 80],
where the label is hidden and it must read the input.

**Equal optimiser budgets.** Each block trains as many steps as the end-to-end network (the reference multiplies the
block-wise epochs by B), so its layers get ``cls_steps`` updates x batch, and the shared stem, as the reference's,
is updated at every step of every block: ``B · cls_steps``. The end-to-end networks (the L-layer one and the
one-block-deep control) get the same count for every counterpart parameter: ``B · cls_steps`` steps, their stem
(token embedding, positions, class token, final norm, head) updated at each and their layers at every B-th only
(``cls_steps``). That gives them at least the updates they had before (the stem B times as many), never fewer.

**In this lab.** :mod:`.model` (partition, EDM, AdaLN layers, MLP and token denoisers, the block container, Euler
sampling, the energy distance, the measured cost of a step), :mod:`.train` (2-D data, training runs, evaluation),
:mod:`.experiment` (``run``), :mod:`.claims`, :mod:`.plots`; notebook ``14_diffusion_blocks.ipynb``.
"""

from lab.registry import Method

METHOD = Method.here(__name__,
                     title="DiffusionBlocks: Block-wise Neural Network Training via Diffusion Interpretation",
                     paper="arXiv:2506.14202",
                     summary="A residual network cut into blocks, each trained alone as the denoiser of its own "
                             "noise range: about 1/B of the memory per step.")

__all__ = ["METHOD"]
