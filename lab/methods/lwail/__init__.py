r"""LWAIL: adversarial imitation from one state-only expert episode, in a latent space that knows the dynamics.

Paper: Yang, Yan, Schwing & Wang, "Latent Wasserstein Adversarial Imitation Learning" (arXiv 2603.05440, ICLR
2026; code JackyYang258/LWAIL).

**Idea.** Wasserstein adversarial imitation matches the agent's state-transition distribution to the expert's with
a Lipschitz critic. Lipschitz in the raw state space means "close in Euclidean distance", which says little about
how hard one state is to reach from another (a wall in a maze). LWAIL first learns an embedding φ from random,
state-only transitions with Intention-Conditioned Value Functions (ICVF), whose value ``V(s, g, z) = φ(s)ᵀ T(z)
ψ(g)`` measures how reachable ``g`` is from ``s``; then it runs the Wasserstein critic on ``[φ(s), φ(s')]`` and
rewards the agent with ``sigmoid(-f)``. One state-only expert episode is enough.

**Equations.** ICVF with ``r_x = 0 if s == x else -1``, expectile ``τ = 0.9``, ``γ = 0.99``, two heads:

    A = r_z + γ V̄(s', z, z) - V̄(s, z, z)
    L_ICVF = Σ_k |τ - 1(A < 0)| (r_g + γ min_k V̄_k(s', g, z) - V_k(s, g, z))²

goals ``g`` and intents ``z``: random (0.3), later in the same trajectory (0.5), the current state (0.2). With φ
frozen, the imitation objective and the critic's loss (low on the expert; tanh in the loss only):

    min_π max_{‖f‖_L ≤ 1}  E_{d^π}[f(φ(s), φ(s'))] - E_{d^E}[f(φ(s), φ(s'))]
    L_f = mean tanh f(E) - mean tanh f(π) + λ (‖∇f(x̂)‖ - 1)²,       r(s, s') = sigmoid(-f(φ(s), φ(s')))

and the whole replay buffer is relabelled after each critic update.

**In this lab.** :mod:`.maze` (a numpy point-mass U-maze, the Maze2D analogue, BFS geodesics, the shortest-path
expert), :mod:`.model` (ICVF, the critic and gradient penalty, GAIfO's discriminator, DQN and TD3 networks),
:mod:`.train` (ICVF, the critic, DQN over 8 directions; all cached), :mod:`.pendulum` (gymnasium MuJoCo
InvertedPendulum-v5 with a PD expert and TD3), :mod:`.experiment` (``run``), :mod:`.claims`, :mod:`.plots`,
:mod:`.live` (rollouts and maps for the ``agents`` dashboard); notebook ``18_lwail.ipynb``. Baselines: Euclidean
WAIL (φ = identity), GAIfO, LWAIL without ICVF (a random frozen φ), and the reward ablations ``sigmoid(-f) - 1`` and
``-f``.
"""

from lab.registry import Method

METHOD = Method.here(__name__,
                     title="Latent Wasserstein Adversarial Imitation Learning",
                     paper="arXiv:2603.05440",
                     summary="Imitate one state-only expert episode with a Wasserstein critic on ICVF's latent "
                             "states, reward sigmoid(-f).")

__all__ = ["METHOD"]
