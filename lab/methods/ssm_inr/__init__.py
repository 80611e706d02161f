r"""SSM neural representations: LPNet-S3K, a state-space kernel that compresses one datum into a small network.

Paper: "Exploring State-Space Models for Data-Specific Neural Representations" (OpenReview R5xBLfD9Dv, ICLR 2026
poster). No code was found; the design below follows the lab's research notes, whose facts marked [secondary] come
from summaries of the paper, not from the paper itself: they are **unverified**.

**Idea.** A data-specific neural representation is a network overfitted to one datum (an image, a video): the network
*is* the compressed datum, and its quality is measured by PSNR against its size. The paper asks whether state-space
models make good encoders for such representations. Not as a scan over coordinates: an SSM that reads a window and
keeps only its final hidden state compresses the window, and by [secondary] Theorem 4.1 (A diagonalisable with
distinct nonzero eigenvalues λ_n) the window is recoverable from that state. Folding the scan into one explicit
kernel gives a layer that compresses and downsamples at once: the **S3K** (structured state-space kernel).

**Equations.** A diagonal real SSM ``h_k = Ā h_{k-1} + B̄ u_k`` over a window ``u_0 … u_{L-1}`` ends in

    h_{L-1} = Σ_k Ā^{L-1-k} B̄ u_k = K ⋆ u,      K = [Ā^{L-1}B̄ … ĀB̄ B̄]   (N x C x L),

a convolution at stride ``L``. In n-D the kernel is an outer product of 1-D decays, here
``K[n, c, i, j] = B̄[n, c] ā_{y,n}^{L-1-i} ā_{x,n}^{L-1-j}`` with ``ā = exp(Δ A)``, ``A = -exp(a) < 0`` (real
parameters). [secondary] Additions: an input-adaptive B, a trailing 1x1 convolution, inverted-bottleneck blocks with
SiLU and RMSNorm. **LPNet-S3K** codes each level of a Laplacian pyramid
``l_i = g_i - up(g_{i+1})`` (``g_{i+1} = down(g_i)``, the last level the low-pass ``g_{D-1}``) with its own S3K of
stride ``F / 2^i``, so every level lands on the same ``H/F x W/F`` latent grid; a light deconvolution decoder
reconstructs the datum from the concatenated latents. The whole network is fitted to the one datum by MSE.

**Paper's numbers** [secondary]: Kodak PSNR/MS-SSIM ConvNeXt 25.99/0.883, LPNet-Conv 27.44/0.913, LPNet-Mamba
27.51/0.923, LPNet-S3K 28.09/0.933. CIFAR-100 reconstruction ablation (baseline / stacked / image pyramid /
Laplacian pyramid): S4D 25.49/24.99/25.48/26.06, Mamba 24.90/24.82/24.78/26.58. Pitfalls: the explicit kernel costs
more memory than a plain conv; stacking SSM layers hurts.

**In this lab.** Small data (64 x 64 skimage images, a synthetic video), a few thousand numbers per
representation, every model storing the same count of numbers: the latent grid's values and the decoder's
parameters for LPNet (the encoder only produces the latent and is not stored; one decoder and one latent grid for
every LPNet variant), the MLP's weights for SIREN. The LPNet encoders also have the same parameter count
(``enc_budget``, within ~10%). Our design choices where the notes are silent: the input-adaptive B is a per-window,
per-state gate ``2σ(W mean(window) + b)`` on B̄ (constant over a window, so the kernel stays explicit); SSIM
(scikit-image) stands in for MS-SSIM, which needs larger images. Baselines: LPNet with a plain strided-conv encoder,
with a Mamba encoder (lab.core's Mamba over the patch sequence), a ConvNeXt-style encoder and SIREN (a coordinate
MLP, which reviewers asked for). The control of the S3K claims is S3K without its state-space structure (every decay
``ā = 1``: a window mean then a 1x1 map). Refits with a quarter and a half of the training steps show whether a run
measures capacity or optimisation speed.

**Does the headline reproduce?** Not in any regime we tried. Besides quick and a 4000-step probe, one-off probes (the
notebook's section "Where could the paper's margin live?" has the table) tried the paper's larger images (astronaut
128 px at the same stored numbers per pixel), a full 2-D state grid (the lab ties the two axes' state indices),
oscillating (complex) modes, and dataset reconstruction like the paper's CIFAR-100 ablation (one autoencoder over
many 32 x 32 crops, held-out crops): LPNet-S3K stayed below the strongest baseline in the mean of every regime;
complex modes close most of the gap but do not win reliably. The decays matter (S3K beats its no-decay control in
every probe).

Modules: :mod:`.data` (the data), :mod:`.model` (S3K, pyramids, encoders, decoder, SIREN, budget matching),
:mod:`.train` (the fits, cached; ``train_all`` fits a run's missing ones side by side on the cores,
the same weights bit for bit), :mod:`.experiment` (``run``), :mod:`.claims`, :mod:`.plots`, :mod:`.live` (the
``compact_models`` dashboard's computations); notebook ``11_ssm_inr.ipynb``.
"""

from lab.registry import Method

METHOD = Method.here(__name__,
                     title="Exploring State-Space Models for Data-Specific Neural Representations",
                     paper="OpenReview:R5xBLfD9Dv",
                     summary="An SSM folded into one strided kernel (S3K) codes each level of a Laplacian pyramid; "
                             "the network overfitted to one datum is its representation.")

__all__ = ["METHOD"]
