r"""RecurrFNO and its baselines: one-step neural simulators ``u(t) -> u(t + dt)`` with test-time depth K.

A recurrent-depth simulator (RecurrSim) splits a network into an encoder E, a recurrent block R and a decoder D:

    c = E(u),      z_0 ~ N(0, I),      z_k = R(α ⊙ c + β ⊙ z_{k-1})  (k = 1..K),      u' = u + s · D(z_K)

with learned per-channel vectors α, β. K is chosen at test time: more iterations, more compute, (ideally) a more
accurate step. The parameter count does not depend on K.

RecurrFNO (the paper's FNO instance): E is a pointwise lift and one Fourier layer, R is one Fourier layer with a
residual connection whose weights start at zero (R = identity at initialisation, so the first updates cannot blow up
the iteration), D is one Fourier layer and a pointwise projection. We predict the increment ``u' - u`` in units of its
training standard deviation ``s``; inputs are divided by the standard deviation of ``u`` (both stored as buffers).

Training (see :mod:`.training`): K ~ Poisson(e^v) + 1, v ~ N(log Kbar - s²/2, s) per batch
(:func:`sample_depth`); only the last B iterations carry gradients (:meth:`RecurrFNO.iterate`). The same module
serves two baselines: trained at one fixed K, and as a deep-equilibrium model (iterate to a fixed point without
gradients, then one differentiable step: the Jacobian-free backpropagation of Fung et al. 2022). The fixed-depth
baselines are plain FNOs (:class:`FixedDepthFNO`) that ignore K.

Shapes: states ``u`` are ``(batch, *spatial)`` (1-D ``(b, x)``, 2-D ``(b, y, x)``, as the PDE solvers);
latent fields ``c, z`` are ``(batch, width, *spatial)``.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from lab.core.fno import FNO, FourierLayer, count_parameters, pointwise

__all__ = ["FixedDepthFNO", "FrozenDepth", "LearnedStepper", "RecurrFNO", "build_model", "count_parameters",
           "fourier_layers_per_step", "sample_depth"]


def sample_depth(rng: np.random.Generator, mean_depth: float, sigma: float) -> int:
    """One draw of the paper's Poisson-log-normal depth: K = Poisson(e^v) + 1, v ~ N(log Kbar - s²/2, s).

    The log-normal mean is corrected by -s²/2 so that E[e^v] = Kbar, hence E[K] = Kbar + 1 and K >= 1 always.
    """
    v = rng.normal(math.log(mean_depth) - 0.5 * sigma**2, sigma)
    return int(rng.poisson(math.exp(v))) + 1


class _Scaled(nn.Module):
    """Shared normalisation: inputs divided by ``in_scale``, predicted increments multiplied by ``out_scale``."""

    def __init__(self, dim: int, in_scale: float, out_scale: float) -> None:
        super().__init__()
        self.dim = dim
        self.register_buffer("in_scale", torch.tensor(float(in_scale)))
        self.register_buffer("out_scale", torch.tensor(float(out_scale)))

    def _check(self, u: torch.Tensor) -> None:
        if u.dim() != self.dim + 1:
            raise ValueError(f"u has shape {tuple(u.shape)}; expected (batch, {', '.join(['n'] * self.dim)})")


class RecurrFNO(_Scaled):
    """Recurrent-depth FNO: encoder, one recurrent Fourier block iterated K times, decoder.

    Arguments:
        dim: spatial dimensions (1 or 2).
        width: latent channels.
        modes: Fourier modes per axis.
        in_scale, out_scale: standard deviations of the states and of the one-step increments.
        beta_init: initial value of β (0 < β < 1 makes the initial iteration a contraction towards α c / (1 - β)).
        z0_seed: seed of the fixed evaluation state z_0 (training draws a fresh z_0 ~ N(0, I) per sample).

    Call: ``model(u, K) -> u_next``, ``(batch, *spatial) -> (batch, *spatial)``.
    """

    def __init__(self, dim: int, *, width: int, modes: int, in_scale: float = 1.0, out_scale: float = 1.0,
                 beta_init: float = 0.5, z0_seed: int = 0) -> None:
        super().__init__(dim, in_scale, out_scale)
        self.width, self.z0_seed = width, z0_seed
        self.lift = pointwise(1, width, dim)
        self.encoder = FourierLayer(width, modes, dim)
        self.block = FourierLayer(width, modes, dim)
        for p in self.block.parameters():  # zero-initialised residual: R(h) = h + block(h) = h at the start
            nn.init.zeros_(p)
        shape = (1, width) + (1,) * dim
        self.alpha = nn.Parameter(torch.ones(shape))
        self.beta = nn.Parameter(torch.full(shape, float(beta_init)))
        self.decoder = FourierLayer(width, modes, dim)
        self.project = nn.Sequential(pointwise(width, 2 * width, dim), nn.GELU(), pointwise(2 * width, 1, dim))
        self._z0_cache: dict[tuple, torch.Tensor] = {}

    # -- the three parts ---------------------------------------------------------------------------------------------
    def encode(self, u: torch.Tensor) -> torch.Tensor:
        """c = E(u): ``(b, *s) -> (b, width, *s)``."""
        self._check(u)
        return self.encoder(self.lift((u / self.in_scale).unsqueeze(1)))

    def step(self, c: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        """One recurrent iteration z -> R(α ⊙ c + β ⊙ z), R(h) = h + FourierLayer(h)."""
        h = self.alpha * c + self.beta * z
        return h + self.block(h)

    def decode(self, u: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        """u' = u + out_scale · D(z)."""
        return u + self.out_scale * self.project(self.decoder(z)).squeeze(1)

    def initial_state(self, c: torch.Tensor) -> torch.Tensor:
        """z_0: a fresh N(0, I) draw while training; a fixed draw (seed ``z0_seed``) shared by the batch otherwise."""
        if self.training:
            return torch.randn_like(c)
        key = tuple(c.shape[1:]) + (c.dtype, c.device)
        if key not in self._z0_cache:
            g = torch.Generator().manual_seed(self.z0_seed)
            self._z0_cache[key] = torch.randn((1,) + tuple(c.shape[1:]), generator=g).to(c)
        return self._z0_cache[key].expand_as(c)

    def iterate(self, c: torch.Tensor, z: torch.Tensor, K: int, grad_depth: int | None = None,
                trace: list | None = None) -> torch.Tensor:
        """K iterations from z; with ``grad_depth = B`` the first K - B run without autograd (truncated backprop).

        Arguments:
            c: (b, width, *s) encoder output; z: (b, width, *s) initial state.
            K: iterations (>= 1). grad_depth: B, or None for full backpropagation.
            trace: optional list that receives every z_k (k = 1..K), for inspection.
        Returns:
            z_K, (b, width, *s).
        """
        if K < 1:
            raise ValueError(f"K={K!r} is not allowed; allowed: an integer >= 1")
        n_free = 0 if grad_depth is None else max(K - grad_depth, 0)
        if n_free:
            with torch.no_grad():
                c_free = c.detach()
                for _ in range(n_free):
                    z = self.step(c_free, z)
                    if trace is not None:
                        trace.append(z)
            z = z.detach()
        for _ in range(K - n_free):
            z = self.step(c, z)
            if trace is not None:
                trace.append(z)
        return z

    def forward(self, u: torch.Tensor, K: int, grad_depth: int | None = None) -> torch.Tensor:
        c = self.encode(u)
        z = self.iterate(c, self.initial_state(c), K, grad_depth)
        return self.decode(u, z)

    def forward_equilibrium(self, u: torch.Tensor, max_iter: int, tol: float) -> tuple[torch.Tensor, int]:
        """Deep-equilibrium forward: iterate to ||z_k - z_{k-1}|| <= tol ||z_k|| (at most ``max_iter``) without
        gradients, then one differentiable iteration at the fixed point (Jacobian-free backpropagation).

        Returns:
            (u_next, iterations used).
        """
        c = self.encode(u)
        z = self.initial_state(c)
        used = 0
        with torch.no_grad():
            c_free = c.detach()
            while used < max_iter:
                z_new = self.step(c_free, z)
                used += 1
                done = torch.linalg.vector_norm(z_new - z) <= tol * torch.linalg.vector_norm(z_new)
                z = z_new
                if done:
                    break
        z = self.step(c, z.detach())
        return self.decode(u, z), used + 1


class FixedDepthFNO(_Scaled):
    """Fixed-depth FNO baseline with the same call signature (``K`` is accepted and ignored).

    ``depth = 3`` matches RecurrFNO's parameter count (its encoder, block and decoder are three Fourier layers);
    ``depth = 6`` has about twice as many.
    """

    def __init__(self, dim: int, *, width: int, modes: int, depth: int, in_scale: float = 1.0,
                 out_scale: float = 1.0) -> None:
        super().__init__(dim, in_scale, out_scale)
        self.net = FNO(1, 1, width=width, modes=modes, depth=depth, dim=dim, projection=2 * width)

    def forward(self, u: torch.Tensor, K: int | None = None, grad_depth: int | None = None) -> torch.Tensor:
        self._check(u)
        return u + self.out_scale * self.net((u / self.in_scale).unsqueeze(1)).squeeze(1)


def build_model(kind: str, dim: int, *, width: int, modes: int, in_scale: float = 1.0,
                out_scale: float = 1.0) -> nn.Module:
    """The network of a model kind: recurrsim, fixed_k and deq share :class:`RecurrFNO`; fno and fno_2x are
    :class:`FixedDepthFNO` of depth 3 and 6."""
    if kind in ("recurrsim", "fixed_k", "deq"):
        return RecurrFNO(dim, width=width, modes=modes, in_scale=in_scale, out_scale=out_scale)
    if kind in ("fno", "fno_2x"):
        return FixedDepthFNO(dim, width=width, modes=modes, depth=3 if kind == "fno" else 6, in_scale=in_scale,
                             out_scale=out_scale)
    raise ValueError(f"kind={kind!r} is not allowed; allowed: recurrsim, fixed_k, deq, fno, fno_2x")


class FrozenDepth(nn.Module):
    """The K-blind control: a trained RecurrFNO whose depth is frozen at ``K``, whatever depth it is asked for.

    Same weights, same parameters, same call signature as RecurrFNO; only the test-time knob is cut. A claim about
    what depth does must fail on it.
    """

    def __init__(self, model: RecurrFNO, K: int) -> None:
        super().__init__()
        if K < 1:
            raise ValueError(f"K={K!r} is not allowed; allowed: an integer >= 1")
        self.inner, self.K = model, int(K)

    def forward(self, u: torch.Tensor, K: int | None = None, grad_depth: int | None = None) -> torch.Tensor:
        return self.inner(u, self.K)


def fourier_layers_per_step(kind: str, K: int) -> int:
    """Fourier layers one step applies (the cost axis, free of timer noise): RecurrFNO's encoder, K blocks and
    decoder; the FNOs' 3 or 6 layers. The lift and projection are the same for every model and not counted."""
    if kind in ("recurrsim", "fixed_k", "deq"):
        return int(K) + 2
    if kind in ("fno", "fno_2x"):
        return 3 if kind == "fno" else 6
    raise ValueError(f"kind={kind!r} is not allowed; allowed: recurrsim, fixed_k, deq, fno, fno_2x")


class LearnedStepper:
    """A trained model at depth K with the PDE steppers' call signature: ``stepper(u) -> u_next``.

    Works with :func:`lab.datasets.pde.rollout`; NumPy in, NumPy out (float32); tensors stay tensors.

    Arguments:
        model: a trained :class:`RecurrFNO` or :class:`FixedDepthFNO` (put in eval mode here).
        K: recurrent depth (ignored by fixed-depth models).
    """

    def __init__(self, model: nn.Module, K: int | None = None) -> None:
        self.model, self.K = model.eval(), K

    def __call__(self, u):
        is_numpy = isinstance(u, np.ndarray)
        x = torch.from_numpy(np.array(u, dtype=np.float32)) if is_numpy else u.to(torch.float32)
        with torch.inference_mode():
            out = self.model(x, self.K)
        return out.numpy() if is_numpy else out
