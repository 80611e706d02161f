"""LWAIL's networks and losses: ICVF (the latent metric), the Wasserstein critic with its gradient penalty, the
reward, the GAIfO discriminator, and the policy learners' networks (DQN over 8 directions, TD3).

ICVF (Ghosh et al. 2023) learns ``V(s, g, z) = φ(s)ᵀ T(z) ψ(g)`` from state-only transitions: the value of reaching
``g`` while acting as if to reach the intent ``z``. Two heads (own ψ and T over one shared φ) with a min in the
target; the loss is an expectile regression whose weight is set by the intent's advantage::

    A      = r_z + γ V̄(s', z, z) - V̄(s, z, z)            r_x = 0 if s == x else -1
    target = r_g + γ min_k V̄_k(s', g, z)
    L      = Σ_k |τ - 1(A < 0)| (target - V_k(s, g, z))²  (τ = 0.9)

φ is frozen afterwards. The critic ``f`` reads ``[φ(s), φ(s')]``; it is trained low on the expert and high on the
agent, ``mean tanh f(expert) - mean tanh f(agent) + λ (‖∇f(x̂)‖ - 1)²`` at points x̂ between the two, and the
agent's reward is ``sigmoid(-f)`` (tanh only in the critic's loss).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["REWARDS", "ICVF", "FourierFeatures", "GeodesicEmbedding", "QNet", "TD3Actor", "TD3Critic", "critic_loss",
           "encoder_net", "expectile_weight", "gaifo_loss", "gradient_penalty", "icvf_loss", "mlp", "reward_from"]

#: how a critic's output becomes the agent's reward: LWAIL's sigmoid(-f); the positivity ablations -f (unbounded)
#: and sigmoid(-f) - 1 (the same shape, negative); GAIfO's -log(1 - D) from the discriminator's logit
REWARDS = ("sigmoid", "raw", "negative", "gaifo")


def mlp(d_in: int, hidden: int, d_out: int, layers: int = 2) -> nn.Sequential:
    """``d_in -> hidden (-> hidden ...) -> d_out`` with ReLUs between."""
    dims = [d_in] + [hidden] * layers
    mods: list[nn.Module] = []
    for a, b in zip(dims[:-1], dims[1:]):
        mods += [nn.Linear(a, b), nn.ReLU()]
    return nn.Sequential(*mods, nn.Linear(dims[-1], d_out))


class FourierFeatures(nn.Module):
    """``x (..., d) -> [x, sin(π 2^k x), cos(π 2^k x)] (..., d (1 + 2 n_freq))`` for ``k < n_freq``: input features
    that let a small MLP bend sharply across a thin wall (``n_freq = 0``: the identity)."""

    def __init__(self, d: int, n_freq: int):
        super().__init__()
        self.d_out = d * (1 + 2 * n_freq)
        self.register_buffer("freq", torch.pi * 2.0 ** torch.arange(n_freq, dtype=torch.float32))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = (x[..., :, None] * self.freq).flatten(-2)
        return torch.cat([x, torch.sin(a), torch.cos(a)], -1)


def encoder_net(d_state: int, hidden: int, d_out: int, n_freq: int = 0) -> nn.Sequential:
    """An MLP ``d_state -> d_out`` on :class:`FourierFeatures` of its input (``n_freq = 0``: on the raw state)."""
    feat = FourierFeatures(d_state, n_freq)
    return nn.Sequential(feat, mlp(feat.d_out, hidden, d_out))


class GeodesicEmbedding(nn.Module):
    """The oracle metric: each of ``points (n, d)`` mapped to its row of the classical multidimensional scaling of
    ``dist (n, n)`` into ``d_out`` dimensions (a Euclidean embedding whose distances approximate ``dist``); any
    input is mapped to its nearest point's embedding."""

    def __init__(self, points: torch.Tensor, dist: torch.Tensor, d_out: int):
        super().__init__()
        n = len(dist)
        centre = torch.eye(n, dtype=torch.float64) - 1.0 / n
        gram = -0.5 * centre @ dist.double() ** 2 @ centre
        val, vec = torch.linalg.eigh(gram)
        top = torch.argsort(val, descending=True)[:d_out]
        emb = vec[:, top] * val[top].clamp(min=0).sqrt()
        self.register_buffer("points", points.float())
        self.register_buffer("emb", emb.float())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        near = torch.cdist(x.reshape(-1, x.shape[-1]), self.points).argmin(-1)
        return self.emb[near].reshape(*x.shape[:-1], -1)


class ICVF(nn.Module):
    """``V_k(s, g, z) = φ(s)ᵀ T_k(z) ψ_k(g)`` for ``k`` heads over one shared ``φ``.

    Arguments:
        d_state: state size. hidden: width of every MLP. d_latent: size of φ, ψ. heads: value heads. n_freq: octaves
        of the Fourier input features of φ, ψ and the intent encoder (0: the raw state).
    """

    def __init__(self, d_state: int, hidden: int = 64, d_latent: int = 32, heads: int = 2, n_freq: int = 0):
        super().__init__()
        self.d_latent, self.n_freq = d_latent, n_freq
        self.phi = encoder_net(d_state, hidden, d_latent, n_freq)
        self.psi = nn.ModuleList([encoder_net(d_state, hidden, d_latent, n_freq) for _ in range(heads)])
        self.T = nn.ModuleList([mlp(d_latent, hidden, d_latent * d_latent) for _ in range(heads)])
        self.z_enc = nn.ModuleList([encoder_net(d_state, hidden, d_latent, n_freq) for _ in range(heads)])

    def forward(self, s: torch.Tensor, g: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        """Arguments: s, g, z: ``(batch, d_state)``. Returns: ``(heads, batch)`` values."""
        phi = self.phi(s)  # (batch, d)
        out = []
        for psi, T, enc in zip(self.psi, self.T, self.z_enc):
            t = T(enc(z)).view(-1, self.d_latent, self.d_latent)  # (batch, d, d)
            out.append(torch.einsum("bi,bij,bj->b", phi, t, psi(g)))
        return torch.stack(out)


def expectile_weight(adv: torch.Tensor, tau: float) -> torch.Tensor:
    """``τ`` where the advantage is >= 0, ``1 - τ`` where it is negative."""
    return torch.where(adv >= 0, torch.full_like(adv, tau), torch.full_like(adv, 1.0 - tau))


def icvf_loss(model: ICVF, target: ICVF, batch: tuple[torch.Tensor, ...], gamma: float, tau: float) -> torch.Tensor:
    """The ICVF expectile loss on ``batch = (s, s_next, g, z)``, each ``(batch, d_state)``; summed over heads."""
    s, s2, g, z = batch
    r_g = -(s != g).any(-1).float()  # 0 at the goal, -1 elsewhere
    r_z = -(s != z).any(-1).float()
    alive_g, alive_z = -r_g, -r_z  # 0 once the goal (intent) is reached: no bootstrap past it
    with torch.no_grad():
        next_g = target(s2, g, z).min(0).values
        v_zz = target(s, z, z).mean(0)
        next_zz = target(s2, z, z).mean(0)
        adv = r_z + gamma * alive_z * next_zz - v_zz
        y = r_g + gamma * alive_g * next_g
    v = model(s, g, z)  # (heads, batch)
    w = expectile_weight(adv, tau)
    return (w * (y - v) ** 2).mean(-1).sum()


def gradient_penalty(f: nn.Module, x_expert: torch.Tensor, x_agent: torch.Tensor,
                     gen: torch.Generator | None = None) -> torch.Tensor:
    """WGAN-GP: ``mean (‖∇f(x̂)‖ - 1)²`` at ``x̂ = α x_expert + (1 - α) x_agent``, α uniform per row (both inputs
    ``(batch, d)``)."""
    alpha = torch.rand(len(x_expert), 1, generator=gen).to(x_expert)
    x = (alpha * x_expert + (1 - alpha) * x_agent).detach().requires_grad_(True)
    grad, = torch.autograd.grad(f(x).sum(), x, create_graph=True)
    return ((grad.norm(dim=-1) - 1.0) ** 2).mean()


def critic_loss(f: nn.Module, x_expert: torch.Tensor, x_agent: torch.Tensor, gp: float,
                gen: torch.Generator | None = None) -> torch.Tensor:
    """The Wasserstein critic's loss (low on the expert): ``mean tanh f(E) - mean tanh f(A) + gp * GP``."""
    loss = torch.tanh(f(x_expert)).mean() - torch.tanh(f(x_agent)).mean()
    return loss + gp * gradient_penalty(f, x_expert, x_agent, gen)


def gaifo_loss(d: nn.Module, x_expert: torch.Tensor, x_agent: torch.Tensor) -> torch.Tensor:
    """GAIfO's discriminator: binary cross-entropy, expert transitions 1, the agent's 0 (``d`` returns logits)."""
    le, la = d(x_expert), d(x_agent)
    return (F.binary_cross_entropy_with_logits(le, torch.ones_like(le))
            + F.binary_cross_entropy_with_logits(la, torch.zeros_like(la)))


def reward_from(out: torch.Tensor, kind: str) -> torch.Tensor:
    """The agent's reward from the critic's output ``f`` (or the discriminator's logit for ``gaifo``)."""
    if kind == "sigmoid":
        return torch.sigmoid(-out)
    if kind == "raw":
        return -out
    if kind == "negative":
        return torch.sigmoid(-out) - 1.0
    if kind == "gaifo":
        return F.softplus(out)  # -log(1 - D) with D = sigmoid(logit)
    raise ValueError(f"reward={kind!r} is not allowed; allowed: {', '.join(REWARDS)}")


class QNet(nn.Module):
    """DQN's action values: ``(batch, d_state) -> (batch, n_actions)``."""

    def __init__(self, d_state: int, n_actions: int = 8, hidden: int = 64):
        super().__init__()
        self.net = mlp(d_state, hidden, n_actions)

    def forward(self, s: torch.Tensor) -> torch.Tensor:
        return self.net(s)


class TD3Actor(nn.Module):
    """TD3's deterministic policy: ``(batch, d_state) -> (batch, d_action)`` in ``[-max_action, max_action]``."""

    def __init__(self, d_state: int, d_action: int, max_action: float, hidden: int = 64):
        super().__init__()
        self.net = mlp(d_state, hidden, d_action)
        self.max_action = max_action

    def forward(self, s: torch.Tensor) -> torch.Tensor:
        return self.max_action * torch.tanh(self.net(s))


class TD3Critic(nn.Module):
    """TD3's twin Q functions: ``(s, a) -> ((batch,), (batch,))``."""

    def __init__(self, d_state: int, d_action: int, hidden: int = 64):
        super().__init__()
        self.q1 = mlp(d_state + d_action, hidden, 1)
        self.q2 = mlp(d_state + d_action, hidden, 1)

    def forward(self, s: torch.Tensor, a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.cat([s, a], -1)
        return self.q1(x).squeeze(-1), self.q2(x).squeeze(-1)
