"""Gradient Projection Memory and its quantised form (QGPM): bases from layer inputs, their storage, the projection.

Shapes: a layer's weight is ``W (out, d)``; its representation matrix ``R (d, N)`` holds the layer's inputs for
``N`` examples as columns; a basis ``M (d, k)`` has one basis vector per column. Everything is float64 NumPy except
the projection applied to the model's weights (torch, the weights' dtype and device).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch
from scipy.stats import norm
from torch import nn

from lab.checks import check_choice, check_int, check_real
from lab.methods.qgpm.config import BITS

__all__ = ["BITS", "MODES", "FP32_BYTES", "GPM", "QuantisedBasis", "count_sketch", "dequantise", "index_bytes",
           "new_bases", "nf_levels", "outliers_per_tail", "principal_cosines", "quantise", "subspace_similarity",
           "threshold_rank", "uniform_levels"]

#: how bases are stored: full precision, naive uniform quantisation, QGPM
MODES = ("fp", "naive", "qgpm")
FP32_BYTES = 4


# --------------------------------------------------------------------------------------------------------------------
# Bases from representations (GPM, Saha et al. 2021, and QGPM's sketch)
# --------------------------------------------------------------------------------------------------------------------
def count_sketch(R: np.ndarray, rows: int, rng: np.random.Generator) -> np.ndarray:
    """``R S^T`` for a CountSketch ``S (rows, N)``: each column of ``R (d, N)`` goes, with a random sign, into one of
    ``rows`` buckets chosen at random. Returns ``(d, rows)``; ``E[R S^T S R^T] = R R^T``."""
    d, n = R.shape
    bucket = rng.integers(rows, size=n)  # (N,)
    sign = rng.choice([-1.0, 1.0], size=n)  # (N,)
    out = np.zeros((d, rows))
    np.add.at(out.T, bucket, (R * sign).T)
    return out


def threshold_rank(s: np.ndarray, eps: float, total: float | None = None, kept: float = 0.0) -> int:
    """GPM's rule: the smallest ``k`` with ``kept + Σ_{i<=k} s_i² >= eps · total`` (``total`` default ``Σ s²``;
    0 when ``kept`` already reaches it). ``s`` descending."""
    energy = s ** 2
    total = float(energy.sum()) if total is None else float(total)
    if total <= 0 or kept >= eps * total:
        return 0
    cum = kept + np.cumsum(energy)
    return int(min(len(s), np.searchsorted(cum, eps * total) + 1))


def new_bases(R: np.ndarray, M: np.ndarray | None, eps: float, *, sketch_rows: int = 0,
              rng: np.random.Generator | None = None, max_new: int | None = None) -> np.ndarray:
    """The basis vectors GPM adds for a new task's representation ``R (d, N)`` given the stored basis ``M (d, k)``.

    The first task keeps the top singular vectors holding ``eps`` of ``||R||_F²``. Later, ``R̂ = R - M Mᵀ R`` is the
    part outside the memory, and vectors of ``R̂`` are added while ``(||R||² - ||R̂||² + Σ ŝ_i²) / ||R||² < eps``.
    With ``sketch_rows``, ``R`` is replaced by ``R Sᵀ`` (CountSketch, QGPM) before the SVD. ``max_new`` caps the
    vectors added (a memory budget). Returns ``(d, m)``, ``m >= 0``.
    """
    if sketch_rows and sketch_rows < R.shape[1]:
        R = count_sketch(R, sketch_rows, rng if rng is not None else np.random.default_rng(0))
    total = float((R ** 2).sum())
    if M is None or M.shape[1] == 0:
        U, s, _ = np.linalg.svd(R, full_matrices=False)
        k = threshold_rank(s, eps, total)
    else:
        hat = R - M @ (M.T @ R)  # (d, N): what the memory does not span
        U, s, _ = np.linalg.svd(hat, full_matrices=False)
        k = threshold_rank(s, eps, total, kept=total - float((hat ** 2).sum()))
        k = min(k, max(0, R.shape[0] - M.shape[1]))  # never more vectors than dimensions left
    if max_new is not None:
        k = min(k, max(0, int(max_new)))
    return U[:, :k]


def principal_cosines(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """Cosines of the principal angles between the column spaces of ``A (d, k)`` and ``B (d, l)``, descending."""
    qa, _ = np.linalg.qr(A)
    qb, _ = np.linalg.qr(B)
    return np.clip(np.linalg.svd(qa.T @ qb, compute_uv=False), 0.0, 1.0)


def subspace_similarity(A: np.ndarray, B: np.ndarray) -> float:
    """Mean squared cosine of the principal angles (1: the same subspace; ``k/d`` expected for random ones)."""
    c = principal_cosines(A, B)
    return float(np.mean(c ** 2)) if c.size else float("nan")


# --------------------------------------------------------------------------------------------------------------------
# Storing a basis: per-basis quantisation (QGPM's CINF: centred, outliers in FP32, NF-k bin centres) or naive
# --------------------------------------------------------------------------------------------------------------------
def nf_levels(bits: int) -> np.ndarray:
    """NF-k bin centres ``(2^k,)``: ``Φ⁻¹((i + 0.5) / 2^k)`` for ``i < 2^k``, divided by the largest: in [-1, 1]."""
    q = norm.ppf((np.arange(2 ** bits) + 0.5) / 2 ** bits)
    return q / np.abs(q).max()


def uniform_levels(bits: int) -> np.ndarray:
    """``2^k`` evenly spaced levels on [-1, 1] (naive quantisation). ``(2^k,)``"""
    return np.linspace(-1.0, 1.0, 2 ** bits)


def outliers_per_tail(d: int, share: float) -> int:
    """Entries per tail of a ``d``-vector kept in FP32 at outlier share ``p``: those strictly beyond its linearly
    interpolated ``p/2`` (and ``1 - p/2``) quantile, as the official code selects them (``torch.quantile``): the order
    statistics below position ``p/2 (d - 1)``, i.e. ``ceil(p/2 (d - 1))`` (0 only at ``p = 0``; 1 at ``d`` = 64 and
    100 with ``p`` = 2%, where ``floor(p d / 2)`` gave none at ``d`` = 64)."""
    return min(d // 2, math.ceil(share / 2 * (d - 1) - 1e-12)) if share > 0 else 0


def index_bytes(d: int) -> int:
    """Bytes of one outlier's position in a vector of ``d`` entries."""
    return max(1, math.ceil(math.log2(max(d, 2)) / 8))


@dataclass
class QuantisedBasis:
    """One layer's stored basis vectors, each quantised on its own.

    Attributes:
        mode: ``fp``, ``naive`` or ``qgpm``. bits: code width (32 for ``fp``).
        codes: ``(k, d)`` level indices (``fp``: the float32 vectors themselves).
        scale, centre: ``(k,)`` per-vector scale and centre (naive: no centre).
        outliers: per vector, ``(positions, values)`` kept in FP32 (QGPM).
        lam: ``(k,)`` QEA weights ``λ_i`` (1 without QEA).
        cos_error: ``(k,)`` ``e_i = 1 - cos(ũ_i, u_i)``.
    """

    mode: str
    bits: int
    d: int
    codes: np.ndarray
    scale: np.ndarray
    centre: np.ndarray
    outliers: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)
    lam: np.ndarray | None = None
    cos_error: np.ndarray | None = None

    @property
    def k(self) -> int:
        return int(self.codes.shape[0])

    def _qea(self) -> bool:
        """Whether λ is stored (QEA weights some vector below 1)."""
        return self.lam is not None and bool(np.any(self.lam != 1.0))

    def pack(self) -> bytes:
        """The stored basis as one buffer, vector after vector: its inliers' codes (``bits`` each, bit-packed; the
        outliers' slots skipped), its FP32 scale (and centre for QGPM, and λ where QEA weights some vector below 1),
        its outliers' FP32 values and positions (:func:`index_bytes` each, little-endian); ``fp``: the float32
        vectors. The shapes, the mode and the outlier count per vector are the format's, not stored."""
        if self.mode == "fp":
            return np.ascontiguousarray(self.codes, "<f4").tobytes()
        parts, nb = [], index_bytes(self.d)
        for i in range(self.k):
            pos, val = self.outliers[i] if self.outliers else (np.zeros(0, np.int64), np.zeros(0, np.float32))
            keep = np.ones(self.d, bool)
            keep[pos] = False
            bits = np.unpackbits(self.codes[i, keep][:, None], axis=1, bitorder="little")[:, :self.bits]
            parts.append(np.packbits(bits.ravel(), bitorder="little").tobytes())
            head = [self.scale[i], *([self.centre[i]] if self.mode == "qgpm" else []),
                    *([self.lam[i]] if self._qea() else [])]
            parts.append(np.asarray(head, "<f4").tobytes())
            parts.append(np.asarray(val, "<f4").tobytes())
            parts.append(np.asarray(pos, "<u4").view(np.uint8).reshape(-1, 4)[:, :nb].tobytes())
        return b"".join(parts)

    @classmethod
    def unpack(cls, blob: bytes, mode: str, bits: int, d: int, k: int, n_outliers: int = 0,
               qea: bool = False) -> QuantisedBasis:
        """The basis :meth:`pack` stored (``cos_error`` is not stored; λ is 1 where ``qea`` is False)."""
        if mode == "fp":
            if len(blob) != FP32_BYTES * k * d:
                raise ValueError(f"{len(blob) - FP32_BYTES * k * d} bytes left over unpacking an fp basis of {k} "
                                 "vectors")
            V = np.frombuffer(blob, "<f4").reshape(k, d)
            return cls("fp", 32, d, V.copy(), np.ones(k), np.zeros(k), lam=np.ones(k))
        nb, n_in = index_bytes(d), d - n_outliers
        n_code, n_head = math.ceil(n_in * bits / 8), 1 + (mode == "qgpm") + bool(qea)
        codes, scale, centre, lam = np.zeros((k, d), np.uint8), np.ones(k), np.zeros(k), np.ones(k)
        outliers, at = [], 0
        for i in range(k):
            raw = np.unpackbits(np.frombuffer(blob, np.uint8, n_code, at), bitorder="little")[:n_in * bits]
            at += n_code
            inl = np.packbits(raw.reshape(n_in, bits), axis=1, bitorder="little")[:, 0]
            head = np.frombuffer(blob, "<f4", n_head, at).astype(np.float64)
            at += 4 * n_head
            scale[i] = head[0]
            centre[i] = head[1] if mode == "qgpm" else 0.0
            lam[i] = head[-1] if qea else 1.0
            val = np.frombuffer(blob, "<f4", n_outliers, at).copy()
            at += 4 * n_outliers
            raw_pos = np.frombuffer(blob, np.uint8, n_outliers * nb, at).reshape(n_outliers, nb)
            at += n_outliers * nb
            pos = np.zeros((n_outliers, 4), np.uint8)
            pos[:, :nb] = raw_pos
            pos = pos.view("<u4")[:, 0].astype(np.int64)
            keep = np.ones(d, bool)
            keep[pos] = False
            codes[i, keep] = inl
            if mode == "qgpm":
                outliers.append((pos, val))
        if at != len(blob):
            raise ValueError(f"{len(blob) - at} bytes left over unpacking a {mode} basis of {k} vectors")
        return cls(mode, bits, d, codes, scale.astype(np.float32), centre.astype(np.float32), outliers, lam=lam)

    def nbytes(self) -> int:
        """Storage in bytes: the length of :meth:`pack`'s buffer (packed inlier codes, each vector's FP32 scale, and
        centre and λ for QGPM with QEA, each outlier's FP32 value and position)."""
        return len(self.pack())


def quantise(U: np.ndarray, mode: str, bits: int = 8, *, outlier_share: float = 0.01, alpha: float = 0.0
             ) -> QuantisedBasis:
    """Store the basis ``U (d, k)``.

    * ``fp``: as float32.
    * ``naive``: each vector scaled by its largest magnitude and rounded to the nearest of ``2^bits`` uniform levels.
    * ``qgpm``: per vector, the entries below its ``p/2`` and above its ``1 - p/2`` quantile (``p`` =
      ``outlier_share``: :func:`outliers_per_tail` entries per tail) stay FP32; the rest are centred (their mean),
      scaled by their largest magnitude and snapped to the nearest NF-``bits`` level. ``alpha`` sets the QEA
      weights ``λ_i = clip(1 - alpha · e_i, 0, 1)`` from ``e_i = 1 - cos(ũ_i, u_i)``.
    """
    check_choice("mode", mode, MODES)
    d, k = U.shape
    if mode == "fp":
        V = U.T.astype(np.float32)
        return QuantisedBasis("fp", 32, d, V, np.ones(k), np.zeros(k), lam=np.ones(k), cos_error=np.zeros(k))
    check_choice("bits", bits, BITS)
    levels = nf_levels(bits) if mode == "qgpm" else uniform_levels(bits)
    codes = np.zeros((k, d), np.uint8)
    scale, centre, outliers = np.ones(k), np.zeros(k), []
    per_tail = outliers_per_tail(d, outlier_share) if mode == "qgpm" else 0
    for i in range(k):
        u = U[:, i]
        inl = np.ones(d, bool)
        if per_tail:
            order = np.argsort(u)
            pos = np.sort(np.concatenate([order[:per_tail], order[-per_tail:]]))
            inl[pos] = False
            outliers.append((pos.astype(np.int64), u[pos].astype(np.float32)))
        elif mode == "qgpm":
            outliers.append((np.zeros(0, np.int64), np.zeros(0, np.float32)))
        if mode == "qgpm":
            centre[i] = u[inl].mean()
        v = u - centre[i]
        scale[i] = max(float(np.abs(v[inl]).max()), 1e-12)
        codes[i] = np.abs(v[:, None] / scale[i] - levels[None, :]).argmin(axis=1)
    q = QuantisedBasis(mode, bits, d, codes, scale.astype(np.float32), centre.astype(np.float32), outliers)
    Ut = dequantise(q)  # (d, k)
    cos = np.sum(Ut * U, 0) / np.maximum(np.linalg.norm(Ut, axis=0) * np.linalg.norm(U, axis=0), 1e-12)
    q.cos_error = 1.0 - cos
    q.lam = (np.clip(1.0 - alpha * q.cos_error, 0.0, 1.0) if mode == "qgpm" else np.ones(k)).astype(np.float32)
    return q


def dequantise(q: QuantisedBasis) -> np.ndarray:
    """The stored basis as float64 ``(d, k)`` (not orthonormal once quantised)."""
    if q.mode == "fp":
        return q.codes.T.astype(np.float64)
    levels = nf_levels(q.bits) if q.mode == "qgpm" else uniform_levels(q.bits)
    V = levels[q.codes] * q.scale[:, None].astype(np.float64) + q.centre[:, None]  # (k, d)
    for i, (pos, val) in enumerate(q.outliers):
        V[i, pos] = val
    return V.T


# --------------------------------------------------------------------------------------------------------------------
# The memory of a network and the projection of its updates
# --------------------------------------------------------------------------------------------------------------------
class GPM:
    """The gradient projection memory of a model's linear layers (``model.layers``, each ``W (out, d)``).

    Arguments:
        thresholds: GPM's energy threshold ``eps`` per layer.
        mode, bits, outlier_share, alpha: how bases are stored (:func:`quantise`); ``alpha`` > 0: QEA projection.
        sketch_rows: CountSketch the representation to this many columns before the SVD (0: exact).
        max_ranks: at most this many stored vectors per layer (a memory budget; None: no budget).
        seed: the sketches' generator.

    Use: ``update(model, x)`` after each task (``x (N, d_input)`` samples of it); pass ``on_step(model)`` to
    :func:`lab.core.train.fit` while training the next task: after every optimiser step each layer's update
    ``ΔW (out, d)`` becomes ``ΔW - ΔW M̃ Λ M̃ᵀ``. (GPM projects the gradient of an SGD step; ``fit`` steps with AdamW,
    whose per-coordinate scaling would turn a projected gradient back into the protected subspace, so the step's
    update itself is projected; for SGD the two are the same.)
    """

    def __init__(self, thresholds, *, mode: str = "fp", bits: int = 8, outlier_share: float = 0.01,
                 alpha: float = 0.0, sketch_rows: int = 0, max_ranks=None, seed: int = 0):
        self.thresholds = [check_real("threshold", t, 0.0, 1.0, lo_open=True) for t in thresholds]
        self.mode = check_choice("mode", mode, MODES)
        self.bits = bits if mode == "fp" else check_choice("bits", bits, BITS)
        self.outlier_share = check_real("outlier_share", outlier_share, 0.0, 1.0)
        self.alpha, self.max_ranks = float(alpha), None if max_ranks is None else [int(r) for r in max_ranks]
        self.sketch_rows = check_int("sketch_rows", sketch_rows, 0)
        self.rng = np.random.default_rng([seed, 5])
        self.stored: list[list[QuantisedBasis]] = [[] for _ in self.thresholds]  # per layer, one block per task
        self._P: list[torch.Tensor | None] = [None] * len(self.thresholds)  # (d, d) per layer

    # -- the memory -----------------------------------------------------------------------------------------------
    def basis(self, layer: int) -> np.ndarray:
        """The stored basis of ``layer`` as used by the projection, ``(d, k)`` (dequantised)."""
        blocks = [dequantise(q) for q in self.stored[layer]]
        return np.concatenate(blocks, axis=1) if blocks else None

    def lam(self, layer: int) -> np.ndarray:
        """``Λ``'s diagonal for ``layer``, ``(k,)``."""
        return np.concatenate([q.lam for q in self.stored[layer]]) if self.stored[layer] else np.zeros(0)

    def ranks(self) -> list[int]:
        """Stored basis vectors per layer."""
        return [sum(q.k for q in blocks) for blocks in self.stored]

    def nbytes(self) -> list[int]:
        """Bytes of the stored bases per layer (outlier positions and values, scales, centres, λ included)."""
        return [sum(q.nbytes() for q in blocks) for blocks in self.stored]

    def update(self, model: nn.Module, x: torch.Tensor) -> list[np.ndarray]:
        """Add the bases of a finished task: representations ``R = inputsᵀ (d, N)`` of each layer for ``x (N, d0)``.
        Returns each layer's representation matrix (for the caller's measurements)."""
        reps = [a.double().numpy().T for a in model.layer_inputs(x)]  # [(d, N)]
        for layer, (R, eps) in enumerate(zip(reps, self.thresholds)):
            room = None if self.max_ranks is None else self.max_ranks[layer] - self.ranks()[layer]
            U = new_bases(R, self.basis(layer), eps, sketch_rows=self.sketch_rows, rng=self.rng, max_new=room)
            if U.shape[1]:
                self.stored[layer].append(quantise(U, self.mode, self.bits, outlier_share=self.outlier_share,
                                                   alpha=self.alpha))
            M = self.basis(layer)
            self._P[layer] = None if M is None else torch.from_numpy((M * self.lam(layer)) @ M.T)
        return reps

    # -- the projection -------------------------------------------------------------------------------------------
    def projector(self, layer: int) -> torch.Tensor | None:
        """``M̃ Λ M̃ᵀ`` of ``layer``, ``(d, d)`` float64 (None: empty memory)."""
        return self._P[layer]

    def on_step(self, model: nn.Module):
        """An ``on_step(step, model, optimizer)`` for :func:`lab.core.train.fit` while training the next task: it
        remembers the weights now (before the first step) and, after every step, replaces each layer's update
        ``ΔW (out, d)`` by ``ΔW - ΔW M̃ Λ M̃ᵀ`` (on the weights' device)."""
        prev = [layer.weight.detach().clone() for layer in model.layers]
        on_device: dict[int, torch.Tensor] = {}

        @torch.no_grad()
        def project(step: int, m: nn.Module, optimizer=None) -> None:
            for k, layer in enumerate(m.layers):
                W = layer.weight  # (out, d)
                if prev[k].device != W.device:
                    prev[k] = prev[k].to(W.device)
                if self._P[k] is not None:
                    if k not in on_device:
                        on_device[k] = self._P[k].to(W.device, W.dtype)
                    W.sub_((W - prev[k]) @ on_device[k])
                prev[k].copy_(W)

        return project
