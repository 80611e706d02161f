"""The delayed-estimation task, the swap-model generator, the rate RNN with a fixed 2-D output subspace trained by a
DDPM loss (reverse diffusion as network dynamics) or by MSE, and the Bays (2009) mixture fitted by EM.

Angles are radians on the circle; ``wrap`` maps differences into ``(-π, π]``. Shapes are written ``(B, ...)`` for a
batch of trials, ``n`` for the RNN's units, ``T`` for the diffusion steps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from scipy.special import i0e, i1e
from torch import nn

__all__ = ["Mixture", "RateRNN", "Schedule", "Timing", "Trials", "behaviour", "behaviour_mean", "colour_points",
           "fit_mixture", "inputs", "kappa_from_r", "mean_skill", "sample_trials", "swap_probability",
           "von_mises_pdf", "wrap"]



def wrap(a):
    """Angle differences into ``(-π, π]`` (numpy arrays or tensors)."""
    if isinstance(a, torch.Tensor):
        return torch.remainder(a + math.pi, 2 * math.pi) - math.pi
    return np.remainder(np.asarray(a) + np.pi, 2 * np.pi) - np.pi


# ----------------------------------------------------------------------------------------------------------------
# The task and the generator of surrogate behaviour
# ----------------------------------------------------------------------------------------------------------------
def swap_probability(delta, p_max: float, width: float):
    """Probability of reporting the distractor's colour when it lies ``delta`` away from the cued item in location.

    ``p(Δ) = 2 p_max / (1 + exp(Δ² / width))``: ``p_max`` at Δ = 0, falling with the distance (with ``p_max`` = 1/2
    this is the two-item softmax over ``-Δ² / width`` of the upstream example config, width 1.5 [secondary]).
    """
    d2 = wrap(delta) ** 2
    if isinstance(d2, torch.Tensor):
        return 2 * p_max * torch.sigmoid(-d2 / width)
    return 2 * p_max / (1 + np.exp(d2 / width))


@dataclass
class Trials:
    """A batch of two-item trials (item 0 is the cued one; the input code sums the items, so order does not exist).

    Attributes:
        loc: ``(B, 2)`` locations (the probe feature). col: ``(B, 2)`` colours (the report feature).
        p_swap: ``(B,)`` the generator's swap probability. swapped: ``(B,)`` bool, the generator's draw.
    """

    loc: torch.Tensor
    col: torch.Tensor
    p_swap: torch.Tensor
    swapped: torch.Tensor

    @property
    def distance(self) -> torch.Tensor:
        """``(B,)`` |location of the distractor - location of the cued item| in ``[0, π]``."""
        return wrap(self.loc[:, 1] - self.loc[:, 0]).abs()


def sample_trials(n: int, gen: torch.Generator, p_max: float, width: float) -> Trials:
    """``n`` trials with uniform locations and colours, and a swap drawn from :func:`swap_probability`."""
    loc = torch.rand(n, 2, generator=gen) * 2 * math.pi
    col = torch.rand(n, 2, generator=gen) * 2 * math.pi
    p = swap_probability(loc[:, 1] - loc[:, 0], p_max, width)
    swapped = torch.rand(n, generator=gen) < p
    return Trials(loc, col, p, swapped)


def colour_points(trials: Trials, radius: float) -> torch.Tensor:
    """``(B, 2, 2)``: the cued and the distractor colour as points ``radius (cos θ, sin θ)`` in the output plane."""
    return radius * torch.stack([trials.col.cos(), trials.col.sin()], dim=-1)


def behaviour(trials: Trials, radius: float, sd: float, gen: torch.Generator) -> torch.Tensor:
    """``(B, 2)`` surrogate responses in the output plane: the swapped-to colour's point plus isotropic Gaussian
    noise of std ``sd``: one draw from the two-Gaussian target mixture (weights ``1 - p_swap``, ``p_swap``)."""
    pts = colour_points(trials, radius)  # (B, 2, 2)
    pick = pts[torch.arange(len(pts)), trials.swapped.long()]  # (B, 2)
    return pick + sd * torch.randn(pick.shape, generator=gen)


def behaviour_mean(trials: Trials, p_swap: torch.Tensor | None = None, radius: float = 1.0) -> torch.Tensor:
    """``(B, 2)`` the mean of the surrogate behaviour given the trial, ``(1 - p) c_T + p c_NT`` (the report noise has
    mean 0): what a network trained by MSE on the behaviour's draws learns at best. ``p_swap``: default the
    trials' own swap probability."""
    p = (trials.p_swap if p_swap is None else p_swap)[:, None]
    pts = colour_points(trials, radius)  # (B, 2, 2)
    return (1 - p) * pts[:, 0] + p * pts[:, 1]


def mean_skill(x: torch.Tensor, mean: torch.Tensor) -> float:
    """How much of the behaviour's mean an output captures: ``1 - Σ ||x - m||² / Σ ||m||²`` over trials.

    1: the output is the behaviour's mean ``m`` (:func:`behaviour_mean`) on every trial, the best a network trained
    by MSE can do; 0: an output of 0 (or as far from ``m`` as 0 is); about -1: a random colour on the circle.
    Arguments: x, mean: ``(B, 2)``.
    """
    return float(1 - ((x - mean) ** 2).sum() / (mean ** 2).sum())


@dataclass(frozen=True)
class Timing:
    """Steps of each epoch of a trial: stimulus, delay, cue, delay, then ``response`` steps (the T diffusion steps
    of the DDPM-trained network)."""

    stimulus: int
    delay1: int
    cue: int
    delay2: int
    response: int

    @property
    def before_response(self) -> int:
        return self.stimulus + self.delay1 + self.cue + self.delay2


def inputs(trials: Trials, timing: Timing, n_loc: int = 8, tuning: float = 2.0) -> torch.Tensor:
    """``(B, L, 3 n_loc + 2)`` the inputs over a whole trial, ``L = before_response + response``.

    A conjunctive population code over ``n_loc`` preferred locations ``φ_i`` with von Mises tuning
    ``f_i(ζ) = exp(κ (cos(ζ - φ_i) - 1))`` (``κ = tuning``): during the stimulus, channel pair ``i`` carries
    ``Σ_items f_i(ζ) (cos θ, sin θ)`` (colour at location); during the cue, channel ``2 n_loc + i`` carries
    ``f_i(ζ_cued)``; during the response, a go signal and a clock ``k / T`` (``k = T..1``).
    """
    B = len(trials.loc)
    phi = torch.arange(n_loc) * (2 * math.pi / n_loc)  # (n_loc,)
    f = torch.exp(tuning * (torch.cos(trials.loc[:, :, None] - phi) - 1))  # (B, 2, n_loc)
    colour = torch.stack([trials.col.cos(), trials.col.sin()], dim=-1)  # (B, 2, 2)
    conj = (f[:, :, :, None] * colour[:, :, None, :]).sum(1).reshape(B, 2 * n_loc)  # (B, 2 n_loc)
    L = timing.before_response + timing.response
    s = torch.zeros(B, L, 3 * n_loc + 2)
    s[:, : timing.stimulus, : 2 * n_loc] = conj[:, None]
    t0 = timing.stimulus + timing.delay1
    s[:, t0: t0 + timing.cue, 2 * n_loc: 3 * n_loc] = f[:, None, 0]
    t0 = timing.before_response
    s[:, t0:, -2] = 1.0
    s[:, t0:, -1] = torch.linspace(1.0, 1.0 / timing.response, timing.response)
    return s


# ----------------------------------------------------------------------------------------------------------------
# DDPM schedule
# ----------------------------------------------------------------------------------------------------------------
class Schedule:
    """A DDPM noise schedule with ``β_k`` linear from ``beta_first`` to ``beta_last``, ``k = 1..T``.

    ``α_k = 1 - β_k``, ``ᾱ_k = Π_{j<=k} α_j``; forward marginal ``x_k = √ᾱ_k x_0 + √(1 - ᾱ_k) ε``; posterior mean
    ``μ̃_k = (x_k - β_k / √(1 - ᾱ_k) ε) / √α_k`` and variance ``β̃_k = β_k (1 - ᾱ_{k-1}) / (1 - ᾱ_k)``. Tensors are
    indexed ``k - 1``.
    """

    def __init__(self, steps: int, beta_first: float, beta_last: float):
        self.T = steps
        self.beta = torch.linspace(beta_first, beta_last, steps, dtype=torch.float64)
        self.alpha = 1 - self.beta
        self.alpha_bar = torch.cumprod(self.alpha, 0)
        prev = torch.cat([torch.ones(1, dtype=torch.float64), self.alpha_bar[:-1]])
        self.beta_tilde = self.beta * (1 - prev) / (1 - self.alpha_bar)

    def coef(self, k: int) -> tuple[float, float, float, float]:
        """``(√ᾱ_k, √(1 - ᾱ_k), √α_k, β_k)`` for step ``k`` (1..T)."""
        i = k - 1
        return (float(self.alpha_bar[i].sqrt()), float((1 - self.alpha_bar[i]).sqrt()), float(self.alpha[i].sqrt()),
                float(self.beta[i]))


# ----------------------------------------------------------------------------------------------------------------
# The rate RNN
# ----------------------------------------------------------------------------------------------------------------
class RateRNN(nn.Module):
    """A leaky rate network ``Λ ṙ = -r + F(r, s, η)`` (Euler, ``leak = dt / Λ``)::

        r_{t+1} = (1 - leak) r_t + leak (W tanh(r_t) + U s_t + b) + noise · P⊥ η_t,

    whose output ``x = W_x r`` lies in a fixed 2-D subspace: ``W_x`` ``(2, n)`` has orthonormal rows and is not
    trained; ``P⊥ = I - W_xᵀ W_x`` projects onto the rest, where the memory lives, and the private noise ``η`` acts
    only there. In the response period of the DDPM-trained network the output plane carries the diffusion: the
    state's output part at reverse step ``k`` is ``x_k``, and one network step yields the predicted reverse mean
    ``μ̂_k = W_x r_{t+1}`` of ``x_{k-1}``.
    """

    def __init__(self, n: int, n_in: int, leak: float, noise: float, seed: int, act: str = "tanh"):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.n, self.leak, self.noise = n, leak, noise
        self.W = nn.Parameter(torch.randn(n, n, generator=g) * (0.9 / math.sqrt(n)))
        self.U = nn.Parameter(torch.randn(n, n_in, generator=g) / math.sqrt(n_in))
        self.act = torch.tanh if act == "tanh" else torch.relu
        self.b = nn.Parameter(torch.zeros(n))
        q, _ = torch.linalg.qr(torch.randn(n, 2, generator=g))  # (n, 2) orthonormal columns
        self.register_buffer("W_x", q.T.contiguous())  # (2, n): the fixed readout

    def step(self, r: torch.Tensor, s: torch.Tensor, gen: torch.Generator | None = None) -> torch.Tensor:
        """One Euler step. Arguments: r ``(B, n)``, s ``(B, n_in)``. Returns ``(B, n)``."""
        F = self.act(r) @ self.W.T + s @ self.U.T + self.b
        nxt = (1 - self.leak) * r + self.leak * F
        if self.noise > 0:
            eta = torch.randn(r.shape, generator=gen, device=r.device) if gen is not None else torch.randn_like(r)
            nxt = nxt + self.noise * self.perp(eta)
        return nxt

    def readout(self, r: torch.Tensor) -> torch.Tensor:
        """``(B, n) -> (B, 2)``: the output ``x = W_x r``."""
        return r @ self.W_x.T

    def perp(self, r: torch.Tensor) -> torch.Tensor:
        """``(B, n)``: ``r`` without its output-plane part."""
        return r - self.readout(r) @ self.W_x

    def with_output(self, r: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """``(B, n)``: ``r`` with its output-plane part replaced by ``x`` ``(B, 2)`` (teacher forcing)."""
        return self.perp(r) + x @ self.W_x

    def prelude(self, s: torch.Tensor, n_steps: int, gen: torch.Generator | None = None) -> torch.Tensor:
        """Run the stimulus, delays and cue from ``r = 0``: ``s`` ``(B, L, n_in)``. Returns ``r`` ``(B, n)``."""
        r = torch.zeros(s.shape[0], self.n, device=s.device)
        for t in range(n_steps):
            r = self.step(r, s[:, t], gen)
        return r

    # -- training losses ----------------------------------------------------------------------------------------
    def ddpm_loss(self, s: torch.Tensor, x0: torch.Tensor, sched: Schedule, start: int) -> torch.Tensor:
        """The DDPM ε-prediction loss on the output plane over the response period, with teacher forcing.

        One forward chain ``x_k = √α_k x_{k-1} + √β_k z_k`` is drawn per trial; reverse step ``k = T..1`` is network
        step ``start + T - k``, whose output part is set to ``x_k``. The step gives ``μ̂_k``, read as the noise
        estimate ``ε̂_k = (x_k - √α_k μ̂_k) √(1 - ᾱ_k) / β_k`` (the DDPM posterior mean solved for ε), compared with
        ``ε_k = (x_k - √ᾱ_k x_0) / √(1 - ᾱ_k)``; the loss is the mean of ``||ε̂_k - ε_k||²``. The forced inputs form
        one Markov chain, so the earlier (noisier) ``x_{>k}`` the network has seen tell nothing about ``x_0`` beyond
        ``x_k``: independent draws per step would let the network average them into ``x_0`` and learn a denoiser
        that fails when it runs on its own samples.

        Arguments:
            s: ``(B, L, n_in)``. x0: ``(B, 2)`` the target draws. start: the first response step.
        """
        chain, x = [], x0
        for k in range(1, sched.T + 1):
            _, _, sa, beta = sched.coef(k)
            x = sa * x + math.sqrt(beta) * torch.randn_like(x0)
            chain.append(x)  # chain[k - 1] = x_k
        r = self.prelude(s, start)
        total = x0.new_zeros(())
        for j, k in enumerate(range(sched.T, 0, -1)):
            ab, sab, sa, beta = sched.coef(k)
            xk = chain[k - 1]
            eps = (xk - ab * x0) / sab
            r = self.step(self.with_output(r, xk), s[:, start + j])
            eps_hat = (xk - sa * self.readout(r)) * sab / beta
            total = total + ((eps_hat - eps) ** 2).sum(-1).mean()
        return total / sched.T

    def mse_loss(self, s: torch.Tensor, x0: torch.Tensor, start: int) -> torch.Tensor:
        """The baseline: mean over response steps and trials of ``||x_t - x_0||²``, the network running freely."""
        r = self.prelude(s, start)
        total = x0.new_zeros(())
        for t in range(start, s.shape[1]):
            r = self.step(r, s[:, t])
            total = total + ((self.readout(r) - x0) ** 2).sum(-1).mean()
        return total / (s.shape[1] - start)

    # -- responses ------------------------------------------------------------------------------------------------
    @torch.no_grad()
    def sample(self, s: torch.Tensor, start: int, sched: Schedule | None, gen: torch.Generator) -> torch.Tensor:
        """Responses ``(B, 2)`` in the output plane.

        With ``sched`` (the DDPM-trained network): the output plane starts from ``x_T ~ N(0, I)`` and the network's
        own steps denoise it, ``x_{k-1} = μ̂_k + √β̃_k z`` (no noise at the last step). Without (the MSE network):
        the output after the free-running response period.
        """
        r = self.prelude(s, start, gen)
        if sched is not None:
            r = self.with_output(r, torch.randn(len(r), 2, generator=gen))
        for j in range(s.shape[1] - start):
            r = self.step(r, s[:, start + j], gen)
            if sched is not None:
                k = sched.T - j
                if k > 1:
                    r = r + float(sched.beta_tilde[k - 1].sqrt()) * torch.randn(len(r), 2, generator=gen) @ self.W_x
        return self.readout(r)


# ----------------------------------------------------------------------------------------------------------------
# The Bays (2009) mixture
# ----------------------------------------------------------------------------------------------------------------
def von_mises_pdf(x: np.ndarray, mu: np.ndarray, kappa: float) -> np.ndarray:
    """Von Mises density on the circle (scaled Bessel function: stable for large κ)."""
    return np.exp(kappa * (np.cos(x - mu) - 1)) / (2 * np.pi * i0e(kappa))


def kappa_from_r(r: float) -> float:
    """Maximum-likelihood κ for a mean resultant length ``r`` (Fisher's approximation of ``A1⁻¹``, refined by two
    Newton steps on ``A1(κ) = I1(κ)/I0(κ) = r``)."""
    r = float(np.clip(r, 1e-9, 1 - 1e-9))
    if r < 0.53:
        k = 2 * r + r ** 3 + 5 * r ** 5 / 6
    elif r < 0.85:
        k = -0.4 + 1.39 * r + 0.43 / (1 - r)
    else:
        k = 1 / (r ** 3 - 4 * r ** 2 + 3 * r)
    for _ in range(2):
        a = i1e(k) / i0e(k)
        k = max(k - (a - r) / max(1 - a * a - a / k, 1e-12), 1e-6)
    return float(k)


@dataclass(frozen=True)
class Mixture:
    """The Bays (2009) mixture ``p(θ̂) = w_T vM(θ̂; θ_T, κ) + w_NT vM(θ̂; θ_NT, κ) + w_U / 2π`` fitted to responses;
    ``loglik`` is the mean log-likelihood per response."""

    w_t: float
    w_nt: float
    w_u: float
    kappa: float
    loglik: float


def fit_mixture(resp: np.ndarray, target: np.ndarray, nontarget: np.ndarray, iters: int = 300,
                tol: float = 1e-8) -> Mixture:
    """Fit the three-component mixture by EM.

    Arguments:
        resp, target, nontarget: ``(N,)`` reported, cued and distractor colours.
    Returns:
        :class:`Mixture`. E-step: responsibilities of the three components; M-step: weights their means, κ from the
        responsibility-weighted mean resultant length of the errors to each component's centre.
    """
    resp, target, nontarget = (np.asarray(a, float).ravel() for a in (resp, target, nontarget))
    w = np.array([0.6, 0.2, 0.2])
    kappa, prev = 5.0, -np.inf
    ll = -np.inf
    for _ in range(iters):
        dens = np.stack([w[0] * von_mises_pdf(resp, target, kappa), w[1] * von_mises_pdf(resp, nontarget, kappa),
                         np.full_like(resp, w[2] / (2 * np.pi))])  # (3, N)
        tot = dens.sum(0) + 1e-300
        ll = float(np.mean(np.log(tot)))
        z = dens / tot
        w = z.mean(1)
        vm = z[0].sum() + z[1].sum()
        if vm > 0:
            rbar = (z[0] @ np.cos(resp - target) + z[1] @ np.cos(resp - nontarget)) / vm
            kappa = kappa_from_r(rbar) if rbar > 0 else 1e-6
        if abs(ll - prev) < tol:
            break
        prev = ll
    return Mixture(float(w[0]), float(w[1]), float(w[2]), float(kappa), ll)
