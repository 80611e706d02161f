r"""QGPM: Gradient Projection Memory with quantised bases, an error-aware projection and sketched SVDs.

Paper: Kim, Cha, Chen, Wang & Vikalo, "Quantized Gradient Projection Memory for memory-efficient continual
learning" (ICLR 2026, OpenReview xJtxpJ6QdD); built on GPM (Saha, Garg & Roy, ICLR 2021).

**GPM.** A network learning tasks one after another forgets the old ones when new gradients change what the old
inputs map to. For a linear layer ``y = W x``, an update ``ΔW`` leaves the outputs of every input in a subspace
``span(M)`` unchanged when ``ΔW M = 0``. After task ``t``, GPM collects the layer's inputs for ``N`` examples as the
columns of ``R (d, N)`` and stores the part of their span not yet in memory:

    first task:  R = U Σ Vᵀ, keep the smallest k with Σ_{i<=k} σ_i² >= ε ||R||_F²
    later:       R̂ = R - M Mᵀ R,  add û_i while (||R||² - ||R̂||² + Σ_{i<=k} σ̂_i²) / ||R||² < ε

and every later gradient step is projected onto the orthogonal complement: ``∇W <- ∇W - ∇W M Mᵀ``.

**QGPM** stores the bases in few bits: the memory is GPM's cost (``d · k`` floats per layer, growing with the
tasks). Three parts:

1. *Per-basis quantisation with outliers* (CINF): for each basis vector ``u``, the entries outside its ``p/2`` and
   ``1 - p/2`` quantiles stay FP32 with their positions; the rest are centred, scaled by their largest magnitude
   and snapped to NF-k levels ``Φ⁻¹((i + ½) / 2ᵏ)``, normalised to [-1, 1] (dense where a Gaussian's mass is).
2. *Quantisation-error-aware projection* (QEA): a dequantised basis ``M̃`` is no longer orthonormal, and
   ``I - M̃ M̃ᵀ`` is then not a projector (it can push updates back into the protected subspace). With
   ``e_i = 1 - cos(ũ_i, u_i)`` and ``λ_i = clip(1 - α e_i, 0, 1)``:

       ∇W <- ∇W - ∇W M̃ Λ M̃ᵀ,   Λ = diag(λ_i)

3. *CountSketch before the SVD*: ``R`` is replaced by ``R Sᵀ (d, r)``, ``S`` a CountSketch (each column of ``R``
   added with a random sign into one of ``r`` buckets); for ``r = O(k² / (ε² δ))`` this is a ``(1 ± ε)`` subspace
   embedding, so the top singular vectors are nearly the same at a fraction of the SVD's cost.

Basis memory is the length of each basis's packed buffer (``QuantisedBasis.pack``, which ``unpack`` reads back):
bit-packed inlier codes, FP32 scale, centre and λ per vector, and every outlier's FP32 value and position. The paper:
on 10-split CIFAR-100, GPM FP32 71.11 ACC at 3.13 MB; 8-bit QGPM 70.70 at 0.81 MB (3.83x); 4-bit QGPM 69.74 at
0.48 MB, where naive 4-bit quantisation of the bases collapses to 25.03.

**In this lab.** A bias-free ReLU MLP on permuted sklearn digits (:mod:`lab.datasets.streams`, metrics and training in
:mod:`lab.core.continual`), at quick four tasks at thresholds 0.9/0.95/0.95: a memory with room left (ten tasks at
GPM's pMNIST thresholds fill the 64 input dimensions, and accuracy then trades forgetting for plasticity); QEA with
the official code's α = 10; outliers as the official code picks them (at least one per tail at d = 64).
:mod:`.model` (sketch, GPM's rule, quantisers, the memory and its projection), :mod:`.train` (the runs, cached),
:mod:`.experiment` (``run``), :mod:`.claims`, :mod:`.plots`, :mod:`.live` (the ``forgetting`` dashboard's accuracy
matrix and memory-against-accuracy); notebook ``15_qgpm.ipynb``. The lab's trainer steps with AdamW, so each step's
*update* is projected (the same as projecting the gradient for SGD).
"""

from lab.registry import Method

METHOD = Method.here(__name__,
                     title="Quantized Gradient Projection Memory for Memory-Efficient Continual Learning",
                     paper="OpenReview:xJtxpJ6QdD",
                     summary="GPM's bases stored in 4-8 bits (outliers in FP32, NF-k levels), an error-aware "
                             "projection and sketched SVDs: the same forgetting at a fraction of the memory.")

__all__ = ["METHOD"]
