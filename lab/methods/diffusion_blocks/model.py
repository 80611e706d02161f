"""DiffusionBlocks: a residual network cut into blocks, each an EDM denoiser of its own noise range.

Readable on its own: the noise partition (equal log-normal mass or uniform in log σ), EDM preconditioning and
weighting, AdaLN noise conditioning, the residual MLP denoiser (2-D data), the token classifier (end to end) and the
classifier's blocks on one shared stem (classification by denoising a label embedding), the block container, Euler
sampling through the blocks, the energy distance, and the measured per-step cost of a training step (saved
activations, parameters that get gradients).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from lab.checks import bad_value
from lab.core.transformer import Attention

__all__ = ["PARTITIONS", "AdaLNMLPLayer", "AdaLNTransformerLayer", "DiffusionBlocks", "LABEL_ENTRIES",
           "MLPDenoiser", "NoiseEmbedding", "StemBlock", "TokenClassifier", "TokenStem", "edm_loss",
           "energy_distance", "euler_sample", "karras_sigmas", "lognormal_density", "partition", "precondition",
           "sample_sigmas", "step_cost", "training_range"]

#: the ways of cutting [σ_min, σ_max] into B ranges
PARTITIONS = ("equal_mass", "uniform")
#: the ways the noisy label enters a classifier block (:class:`TokenStem`): into the layers' AdaLN condition, added
#: to the learned query token, or as a token of its own
LABEL_ENTRIES = ("cond", "query", "token")


# ---------------------------------------------------------------------------------------------------------------
# Noise levels
# ---------------------------------------------------------------------------------------------------------------
def _phi(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.vectorize(math.erf)(np.asarray(x, float) / math.sqrt(2.0)))


def _phi_inv(q: np.ndarray) -> np.ndarray:
    return torch.special.ndtri(torch.as_tensor(q, dtype=torch.float64)).numpy()


def partition(n_blocks: int, kind: str = "equal_mass", *, p_mean: float = -1.2, p_std: float = 1.2,
              sigma_min: float = 0.002, sigma_max: float = 80.0) -> np.ndarray:
    """Edges of the blocks' noise ranges, descending: ``σ_max = e_0 > e_1 > ... > e_B = σ_min``; block ``b`` (in
    network order, the first block meets pure noise) owns ``[e_{b+1}, e_b]``.

    ``equal_mass``: each range holds 1/B of the log-normal mass of ``ln σ ~ N(p_mean, p_std²)`` on the interval:
    ``q_b = q_min + (b/B)(q_max - q_min)``, ``σ_b = exp(p_mean + p_std Φ⁻¹(q_b))``. ``uniform``: equal widths in
    ``ln σ``.

    Returns:
        ``(n_blocks + 1,)`` float64.
    """
    if n_blocks < 1:
        raise bad_value("n_blocks", n_blocks, "an integer >= 1")
    if kind not in PARTITIONS:
        raise bad_value("partition", kind, ", ".join(PARTITIONS))
    if not 0 < sigma_min < sigma_max:
        raise bad_value("sigma_min", sigma_min, f"a number in (0, sigma_max={sigma_max})")
    frac = np.arange(n_blocks + 1) / n_blocks  # 0 .. 1, ascending σ
    lo, hi = math.log(sigma_min), math.log(sigma_max)
    if kind == "uniform":
        edges = np.exp(lo + frac * (hi - lo))
    else:
        q_min, q_max = _phi((lo - p_mean) / p_std), _phi((hi - p_mean) / p_std)
        edges = np.exp(p_mean + p_std * _phi_inv(q_min + frac * (q_max - q_min)))
    edges[0], edges[-1] = sigma_min, sigma_max  # exact ends despite round-off
    return edges[::-1].copy()


def training_range(edges: np.ndarray, b: int, gamma: float = 0.05) -> tuple[float, float]:
    """Block ``b``'s training range: its own ``[e_{b+1}, e_b]`` widened on each side by ``(e_b / e_{b+1})^γ``
    (the paper's overlap, so neighbouring blocks agree at their common edge), kept inside ``[σ_min, σ_max]``."""
    lo, hi = float(edges[b + 1]), float(edges[b])
    alpha = (hi / lo) ** gamma
    return max(lo / alpha, float(edges[-1])), min(hi * alpha, float(edges[0]))


def sample_sigmas(n: int, lo: float, hi: float, p_mean: float, p_std: float,
                  generator: torch.Generator | None = None) -> torch.Tensor:
    """``n`` noise levels from the log-normal ``ln σ ~ N(p_mean, p_std²)`` truncated to ``[lo, hi]`` (inverse
    CDF). Returns ``(n,)`` float32."""
    a, b = _phi((math.log(lo) - p_mean) / p_std), _phi((math.log(hi) - p_mean) / p_std)
    u = float(a) + (float(b) - float(a)) * torch.rand(n, generator=generator, dtype=torch.float64)
    u = u.clamp(1e-300, 1 - 1e-16)
    return torch.exp(p_mean + p_std * torch.special.ndtri(u)).clamp(lo, hi).float()


def lognormal_density(sigma: np.ndarray, p_mean: float, p_std: float) -> np.ndarray:
    """Density of ``ln σ`` (per unit of ln σ) at ``sigma``: the training distribution of end-to-end EDM."""
    z = (np.log(sigma) - p_mean) / p_std
    return np.exp(-0.5 * z * z) / (p_std * math.sqrt(2 * math.pi))


def karras_sigmas(n: int, sigma_min: float, sigma_max: float, rho: float = 7.0) -> np.ndarray:
    """EDM's sampling levels ``(σ_max^{1/ρ} + i/(n-1) (σ_min^{1/ρ} - σ_max^{1/ρ}))^ρ``, ``(n,)`` descending."""
    i = np.arange(n) / max(n - 1, 1)
    return (sigma_max ** (1 / rho) + i * (sigma_min ** (1 / rho) - sigma_max ** (1 / rho))) ** rho


# ---------------------------------------------------------------------------------------------------------------
# EDM preconditioning, weighting, conditioning
# ---------------------------------------------------------------------------------------------------------------
def precondition(raw: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], z: torch.Tensor,
                 sigma: torch.Tensor, sigma_data: float) -> torch.Tensor:
    """EDM's ``D(z, σ) = c_skip z + c_out F(c_in z, c_noise)`` with ``c_skip = σ_d²/(σ²+σ_d²)``,
    ``c_out = σ σ_d / sqrt(σ²+σ_d²)``, ``c_in = 1/sqrt(σ²+σ_d²)``, ``c_noise = ln(σ)/4``.

    Arguments:
        raw: the network ``F(z_in (batch, d), c_noise (batch,)) -> (batch, d)``.
        z: noisy targets ``(batch, d)``. sigma: ``(batch,)``.
    """
    s = sigma.reshape(-1, 1)
    total = s * s + sigma_data ** 2
    c_skip, c_out, c_in = sigma_data ** 2 / total, s * sigma_data / total.sqrt(), 1 / total.sqrt()
    return c_skip * z + c_out * raw(c_in * z, sigma.log() / 4)


def edm_loss(denoised: torch.Tensor, clean: torch.Tensor, sigma: torch.Tensor, sigma_data: float) -> torch.Tensor:
    """``mean_i λ(σ_i) mean_d (D_i - y_i)²`` with ``λ(σ) = (σ² + σ_d²) / (σ σ_d)²``: each σ's effective target
    ``F`` has unit scale. Arguments: ``(batch, d)``, ``(batch, d)``, ``(batch,)``."""
    weight = (sigma ** 2 + sigma_data ** 2) / (sigma * sigma_data) ** 2
    return (weight * ((denoised - clean) ** 2).mean(-1)).mean()


class NoiseEmbedding(nn.Module):
    """``c_noise (batch,) -> (batch, d)``: Fourier features at octave frequencies, then a two-layer MLP."""

    def __init__(self, d: int, n_freqs: int = 8):
        super().__init__()
        self.register_buffer("freqs", math.pi * 2.0 ** (torch.arange(n_freqs) - 3.0))
        self.mlp = nn.Sequential(nn.Linear(2 * n_freqs, d), nn.SiLU(), nn.Linear(d, d))

    def forward(self, c_noise: torch.Tensor) -> torch.Tensor:
        angle = c_noise.reshape(-1, 1) * self.freqs  # (batch, n_freqs)
        return self.mlp(torch.cat([angle.cos(), angle.sin()], -1))


def _zero(layer: nn.Linear) -> nn.Linear:
    nn.init.zeros_(layer.weight)
    nn.init.zeros_(layer.bias)
    return layer


class AdaLNMLPLayer(nn.Module):
    """``h + g · MLP(LN(h) (1 + s) + t)`` with ``(s, t, g)`` a linear map of the condition (adaLN-Zero: the
    layer starts as the identity). ``h (batch, d)``, ``cond (batch, d)`` -> ``(batch, d)``."""

    def __init__(self, d: int, hidden: int):
        super().__init__()
        self.norm = nn.LayerNorm(d, elementwise_affine=False)
        self.mlp = nn.Sequential(nn.Linear(d, hidden), nn.SiLU(), nn.Linear(hidden, d))
        self.mod = _zero(nn.Linear(d, 3 * d))

    def forward(self, h: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
        s, t, g = self.mod(F.silu(cond)).chunk(3, -1)
        return h + g * self.mlp(self.norm(h) * (1 + s) + t)


class AdaLNTransformerLayer(nn.Module):
    """A pre-norm bidirectional transformer layer whose two norms are modulated by the condition (DiT's
    adaLN-Zero). ``h (batch, length, d)``, ``cond (batch, d)`` -> ``(batch, length, d)``."""

    def __init__(self, d: int, n_heads: int):
        super().__init__()
        self.norm1 = nn.LayerNorm(d, elementwise_affine=False)
        self.norm2 = nn.LayerNorm(d, elementwise_affine=False)
        self.attn = Attention(d, n_heads, causal=False)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.mod = _zero(nn.Linear(d, 6 * d))

    def forward(self, h: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
        s1, t1, g1, s2, t2, g2 = self.mod(F.silu(cond)).unsqueeze(1).chunk(6, -1)  # each (batch, 1, d)
        h = h + g1 * self.attn(self.norm1(h) * (1 + s1) + t1)
        return h + g2 * self.mlp(self.norm2(h) * (1 + s2) + t2)


# ---------------------------------------------------------------------------------------------------------------
# Denoisers
# ---------------------------------------------------------------------------------------------------------------
class MLPDenoiser(nn.Module):
    """A residual MLP denoiser of points: ``forward(z (batch, dim), sigma (batch,)) -> D (batch, dim)``.

    Arguments:
        dim: data dimension. width: features. n_layers: residual :class:`AdaLNMLPLayer` s.
        sigma_data: the data's per-coordinate standard deviation (EDM's σ_d).
    """

    def __init__(self, dim: int = 2, width: int = 64, n_layers: int = 2, sigma_data: float = 0.5):
        super().__init__()
        self.sigma_data = sigma_data
        self.inp = nn.Linear(dim, width)
        self.embed = NoiseEmbedding(width)
        self.layers = nn.ModuleList(AdaLNMLPLayer(width, 2 * width) for _ in range(n_layers))
        self.norm = nn.LayerNorm(width)
        self.out = _zero(nn.Linear(width, dim))

    def raw(self, z_in: torch.Tensor, c_noise: torch.Tensor) -> torch.Tensor:
        cond, h = self.embed(c_noise), self.inp(z_in)  # (batch, width) each
        for layer in self.layers:
            h = layer(h, cond)
        return self.out(self.norm(h))

    def forward(self, z: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
        return precondition(self.raw, z, sigma, self.sigma_data)


class TokenClassifier(nn.Module):
    """A small transformer over the input's tokens plus a learned class token, trained end to end by cross-entropy
    (the end-to-end network and the one-block-deep control). ``logits(x (batch, n_tokens, d_token))`` ->
    ``(batch, n_classes)``; the AdaLN conditions are zero (the layers' modulation starts and stays the identity)."""

    def __init__(self, n_tokens: int, d_token: int, n_classes: int, d_model: int = 32, n_layers: int = 2,
                 n_heads: int = 2):
        super().__init__()
        self.tok = nn.Linear(d_token, d_model)
        self.pos = nn.Parameter(0.02 * torch.randn(n_tokens + 1, d_model))
        self.layers = nn.ModuleList(AdaLNTransformerLayer(d_model, n_heads) for _ in range(n_layers))
        self.norm = nn.LayerNorm(d_model)
        self.cls = nn.Parameter(torch.zeros(d_model))
        self.head = nn.Linear(d_model, n_classes)

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        n = len(x)
        h = torch.cat([self.cls.expand(n, 1, -1), self.tok(x)], 1) + self.pos  # (batch, 1 + n_tokens, d_model)
        zeros = x.new_zeros(n, self.cls.shape[0])
        for layer in self.layers:
            h = layer(h, zeros)
        return self.head(self.norm(h[:, 0]))


class TokenStem(nn.Module):
    """What the reference implementation shares across the blocks of a classifier: the token embedding and
    positions, a learned query token, the noise embedder, the final norm, the AdaLN-modulated linear head and the
    class-embedding table (``(n_classes, d_model)``, read L2-normalised), and (``label = "cond"``) the linear map of
    the noisy label into the layers' condition. Each block owns only its transformer layers (:class:`StemBlock`).

    ``label``: how the noisy label enters (:data:`LABEL_ENTRIES`): ``cond`` (added to the noise embedding that
    modulates every layer), ``query`` (added to the query token), ``token`` (a token of its own: one token more than
    the end-to-end network's, so one block keeps more than 1/B of its activations)."""

    def __init__(self, n_tokens: int, d_token: int, n_classes: int, d_model: int = 32, sigma_data: float = 0.5,
                 label: str = "cond"):
        super().__init__()
        if label not in LABEL_ENTRIES:
            raise bad_value("label", label, ", ".join(LABEL_ENTRIES))
        self.sigma_data, self.label = sigma_data, label
        self.tok = nn.Linear(d_token, d_model)
        # [query (+ label), (label,) input tokens]
        self.pos = nn.Parameter(0.02 * torch.randn(n_tokens + (2 if label == "token" else 1), d_model))
        if label == "cond":
            self.lab = nn.Linear(d_model, d_model)
        self.query = nn.Parameter(torch.zeros(d_model))
        self.embed = NoiseEmbedding(d_model)
        self.norm = nn.LayerNorm(d_model)
        self.mod = _zero(nn.Linear(d_model, 2 * d_model))
        self.head = _zero(nn.Linear(d_model, n_classes))
        self.class_emb = nn.Parameter(0.02 * torch.randn(n_classes, d_model))

    def embeddings(self) -> torch.Tensor:
        """The unit-norm class embeddings ``(n_classes, d_model)`` (the reference's ``F.normalize``)."""
        return F.normalize(self.class_emb, dim=-1)


class StemBlock(nn.Module):
    """One block of a classifier: its own ``n_layers`` AdaLN transformer layers on the shared :class:`TokenStem`.

    ``forward(x, z, sigma)``: tokens ``x (batch, n_tokens, d_token)``, the noisy label embedding ``z (batch,
    d_model)`` at noise ``sigma (batch,)`` -> class logits ``(batch, n_classes)``. The sequence is [query, tokens];
    the label ``c_in z`` enters as the stem says (the reference feeds it as the class token itself). With ``cond`` it
    joins σ's embedding in the AdaLN condition of every layer, so the query that gathers the input is the same token
    at every σ and the noise does not swamp it. The denoised embedding is EDM's ``D = c_skip z + c_out
    LN(h_query)``; the logits are the head on ``D`` modulated by the condition (the reference's
    ``forward_output_embeddings``).
    """

    def __init__(self, stem: TokenStem, n_layers: int, n_heads: int = 2):
        super().__init__()
        self.stem = stem
        self.layers = nn.ModuleList(AdaLNTransformerLayer(stem.query.shape[0], n_heads) for _ in range(n_layers))

    def forward(self, x: torch.Tensor, z: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
        st, s = self.stem, sigma.reshape(-1, 1)
        total = s * s + st.sigma_data ** 2
        c_skip, c_out, c_in = st.sigma_data ** 2 / total, s * st.sigma_data / total.sqrt(), 1 / total.sqrt()
        cond = st.embed(sigma.log() / 4)  # (batch, d_model)
        if st.label == "token":  # (batch, 2 + n_tokens, d_model)
            h = torch.cat([st.query.expand(len(x), 1, -1), (c_in * z).unsqueeze(1), st.tok(x)], 1) + st.pos
        elif st.label == "query":  # (batch, 1 + n_tokens, d_model)
            h = torch.cat([(st.query + c_in * z).unsqueeze(1), st.tok(x)], 1) + st.pos
        else:  # the label conditions the layers' modulation beside σ, (batch, 1 + n_tokens, d_model)
            cond = cond + st.lab(c_in * z)
            h = torch.cat([st.query.expand(len(x), 1, -1), st.tok(x)], 1) + st.pos
        for layer in self.layers:
            h = layer(h, cond)
        denoised = c_skip * z + c_out * st.norm(h[:, 0])
        shift, scale = st.mod(F.silu(cond)).chunk(2, -1)
        return st.head(denoised * (1 + scale) + shift)


class DiffusionBlocks(nn.Module):
    """B independent denoisers; block ``b`` owns the noise range ``[edges[b+1], edges[b]]`` (edges descending).

    Arguments:
        blocks: the B denoisers, in network order (the first meets pure noise).
        edges: ``(B + 1,)`` descending (:func:`partition`). gamma: the training ranges' overlap
            (:func:`training_range`).
    """

    def __init__(self, blocks: list[nn.Module], edges: np.ndarray, gamma: float = 0.05):
        super().__init__()
        if len(edges) != len(blocks) + 1:
            raise bad_value("edges", len(edges), f"{len(blocks) + 1} edges for {len(blocks)} blocks")
        self.blocks = nn.ModuleList(blocks)
        self.register_buffer("edges", torch.as_tensor(np.asarray(edges, float), dtype=torch.float64))
        self.gamma = gamma

    def owner(self, sigma: float) -> int:
        """The block whose range holds ``sigma`` (the lower edge belongs to the next block)."""
        inner = self.edges[1:-1].cpu().numpy()
        return int(np.sum(sigma < inner))

    def training_range(self, b: int) -> tuple[float, float]:
        return training_range(self.edges.cpu().numpy(), b, self.gamma)

    def forward(self, *inputs: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
        """Denoise with the block owning ``sigma[0]`` (all rows share one level at inference)."""
        return self.blocks[self.owner(float(sigma[0]))](*inputs, sigma)


# ---------------------------------------------------------------------------------------------------------------
# Sampling, metric, measured cost
# ---------------------------------------------------------------------------------------------------------------
@torch.no_grad()
def euler_sample(denoise: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], z: torch.Tensor,
                 sigmas: np.ndarray, owner: Callable[[float], int] | None = None) -> tuple[torch.Tensor, dict]:
    """Euler steps of the probability-flow ODE ``dz/dσ = (z - D(z, σ))/σ`` down ``sigmas`` and then to 0.

    Arguments:
        denoise: ``D(z (batch, d), sigma (batch,)) -> (batch, d)``. z: the start ``σ_0 · ε``, ``(batch, d)``.
        sigmas: ``(n,)`` descending. owner: σ -> block; the state is recorded whenever the next step belongs to
            another block.
    Returns:
        the final ``z`` and ``{block: z after that block's last step}``.
    """
    path, levels = {}, [*map(float, sigmas), 0.0]
    for i, (s, s_next) in enumerate(zip(levels[:-1], levels[1:])):
        d = denoise(z, torch.full((len(z),), s, dtype=z.dtype))
        z = z + (s_next - s) / s * (z - d)
        if owner is not None and (i == len(sigmas) - 1 or owner(levels[i + 1]) != owner(s)):
            path[owner(s)] = z.clone()
    return z, path


def energy_distance(a: torch.Tensor, b: torch.Tensor) -> float:
    """Energy distance ``2 E|X-Y| - E|X-X'| - E|Y-Y'|`` between samples ``a (n, d)`` and ``b (m, d)`` (within-sample
    terms as U-statistics: unbiased, so two samples of one distribution give about 0, either sign)."""
    a, b = a.double(), b.double()
    n, m = len(a), len(b)
    xy = torch.cdist(a, b).mean()
    xx = torch.cdist(a, a).sum() / (n * (n - 1))
    yy = torch.cdist(b, b).sum() / (m * (m - 1))
    return float(2 * xy - xx - yy)


def step_cost(module: nn.Module, loss_fn: Callable[[], torch.Tensor]) -> tuple[int, int]:
    """Measure one training step of ``module``: the bytes autograd keeps for the backward pass (every tensor saved
    by the forward, counted once per storage, parameters excluded: the activation memory at the step's peak) and
    the parameters that receive a gradient.

    Arguments:
        loss_fn: runs the forward pass and returns the loss.
    Returns:
        ``(saved_bytes, params_with_grad)``.
    """
    params = {p.untyped_storage().data_ptr() for p in module.parameters()}
    saved: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        key = storage.data_ptr()
        if key not in params:
            saved[key] = max(saved.get(key, 0), storage.nbytes())
        return t

    module.zero_grad(set_to_none=True)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = loss_fn()
    loss.backward()
    with_grad = sum(p.numel() for p in module.parameters() if p.grad is not None)
    module.zero_grad(set_to_none=True)
    return sum(saved.values()), with_grad
