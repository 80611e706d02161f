"""Sessions, the benchmark base class and the rate-network benchmarks (low-rank under a linear or BCM-like law; the
full-rank BCM network). See :mod:`lab.datasets.plasticity` for the equations."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from lab.checks import check_choice, check_int, check_real
from lab.datasets.plasticity.schedules import library, session_inputs

__all__ = ["BCMNetwork", "LowRankPlasticNetwork", "PlasticityBenchmark", "Sessions"]


@dataclasses.dataclass
class Sessions:
    """Recorded sessions of one schedule (see the module docstring for the shapes)."""

    y: np.ndarray  # (K, T+1, N) recorded activity
    u: np.ndarray  # (K, T, S) inputs; channel 0 is the plasticity-inducing stimulation
    ubar: np.ndarray  # (K,) stimulation summary of each session
    W: np.ndarray  # (K, N, P) true connectivity during each session
    c: np.ndarray  # (K, R) true plasticity coefficients during each session
    state_end: Any  # the slow state after the last session (to continue with another schedule)

    @property
    def K(self) -> int:
        return self.y.shape[0]


class PlasticityBenchmark:
    """Base class: a network, its slow law and a way to record sessions.

    Subclasses set ``name``, ``N`` (recorded units), ``P`` (features φ acts with), ``R`` (coefficients tracked),
    ``feature`` (``tanh`` or ``poly2``), ``dt``, ``T``, ``n_probe``, ``shared`` (whether W has a session-independent
    part besides the low-rank one) and implement :meth:`initial_state`, :meth:`simulate`, :meth:`coefficients`,
    :meth:`connectivity`, :meth:`distance`.
    """

    name: str
    N: int
    P: int
    R: int
    feature: str
    dt: float
    T: int
    n_probe: int
    shared: bool
    #: units of the true coefficients (for plots)
    c_label: str = "c"

    def initial_state(self) -> Any:
        raise NotImplementedError

    def simulate(self, state: Any, ubar: np.ndarray, rng: np.random.Generator) -> Sessions:
        """Record one session per entry of ``ubar``, starting from the slow ``state``."""
        raise NotImplementedError

    def advance(self, state: Any, ubar: np.ndarray, rng: np.random.Generator) -> Any:
        """The slow state after sessions with summaries ``ubar`` (no recording kept)."""
        return self.simulate(state, ubar, rng).state_end

    def coefficients(self, state: Any) -> np.ndarray:
        """(R,) true coefficients of a slow state."""
        raise NotImplementedError

    def connectivity(self, state: Any) -> np.ndarray:
        """(N, P) true connectivity of a slow state, in the recorded coordinates."""
        raise NotImplementedError

    def distance(self, state: Any, target: Any) -> float:
        """How far a slow state is from a target state (the designed-intervention score)."""
        return float(np.linalg.norm(self.coefficients(state) - self.coefficients(target)))

    def true_rule(self) -> np.ndarray | None:
        """(R, 5) library coefficients Ξ of the true law in :data:`LIBRARY_TERMS` order, or None."""
        return None

    def true_B(self) -> np.ndarray:
        """(N, S) true input matrix in the recorded coordinates."""
        raise NotImplementedError

    def true_bias(self) -> np.ndarray:
        """(N,) true constant drive in the recorded coordinates."""
        return np.zeros(self.N)


class _TanhNetwork(PlasticityBenchmark):
    """Shared fast dynamics of the rate networks (Euler-Maruyama with the model's own step)."""

    feature = "tanh"

    def __init__(self, N: int, dt: float, T: int, n_probe: int, sigma_process: float, sigma_obs: float):
        self.N, self.P, self.dt, self.T, self.n_probe = N, N, dt, T, n_probe
        self.sigma_process, self.sigma_obs = sigma_process, sigma_obs

    def true_B(self) -> np.ndarray:
        return self.B

    def _record(self, W: np.ndarray, u: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Fast dynamics of K sessions at once. W: (K, N, N), u: (K, T, S). Returns y: (K, T+1, N)."""
        K = W.shape[0]
        x = 0.3 * rng.standard_normal((K, self.N))
        xs = np.empty((K, self.T + 1, self.N))
        drive = u @ self.B.T  # (K, T, N)
        noise = math.sqrt(self.dt) * self.sigma_process
        for t in range(self.T):
            xs[:, t] = x
            rec = np.einsum("kij,kj->ki", W, np.tanh(x))
            x = x + self.dt * (-x + rec + drive[:, t]) + noise * rng.standard_normal((K, self.N))
        xs[:, self.T] = x
        return xs + self.sigma_obs * rng.standard_normal(xs.shape)


class LowRankPlasticNetwork(_TanhNetwork):
    """Rate network with W_k = Σ_r c_{k,r} m_r n_rᵀ and a slow law on c (``linear`` or ``bcm``)."""

    shared = False

    #: the true laws' library coefficients, per component (rows) in LIBRARY_TERMS order
    RULES = {
        # a ū - b (c - c*) + γ c ū:  [b c*, -b, a, γ, 0]
        "linear": np.array([[0.12, -0.20, 0.50, -0.15, 0.0],   # a=0.5, b=0.2, c*=0.6, γ=-0.15: potentiated
                            [0.30, -0.20, -0.25, 0.10, 0.0]]),  # a=-0.25, b=0.2, c*=1.5, γ=0.1: depressed
        # η c (ū - c/θ) - λ (c - c*):  [λ c*, -λ, 0, η, -η/θ]
        "bcm": np.array([[0.05, -0.10, 0.0, 0.60, -0.30],      # η=0.6, θ=2, λ=0.1, c*=0.5
                         [0.28, -0.20, 0.0, 0.60, -0.50]]),     # η=0.6, θ=1.2, λ=0.2, c*=1.4
    }
    C0 = np.array([0.8, 1.2])

    def __init__(self, rule: str = "linear", *, N: int = 30, dt: float = 0.1, T: int = 500, n_probe: int = 16,
                 sigma_process: float = 0.03, sigma_obs: float = 0.01, overlap: float = 0.5,
                 stim_gain: float = 3.0, probe_gain: float = 3.0, rng: np.random.Generator | None = None):
        check_choice("rule", rule, tuple(self.RULES))
        check_int("N", N, 6)
        check_int("T", T, 2)
        check_int("n_probe", n_probe, 0)
        check_real("dt", dt, 1e-4, 1.0)
        check_real("sigma_process", sigma_process, 0.0, 10.0)
        check_real("sigma_obs", sigma_obs, 0.0, 10.0)
        check_real("overlap", overlap, -1.0, 1.0)
        super().__init__(N, dt, T, n_probe, sigma_process, sigma_obs)
        rng = np.random.default_rng(0) if rng is None else rng
        self.rule, self.R = rule, 2
        self.name = f"lowrank_{rule}"
        q, _ = np.linalg.qr(rng.standard_normal((N, 2 * self.R)))
        self.m = q[:, : self.R]  # (N, R) orthonormal
        self.n = overlap * self.m + math.sqrt(1 - overlap**2) * q[:, self.R:]  # (N, R) orthonormal, m_r·n_r = overlap
        stim = self.n.sum(axis=1) + rng.standard_normal(N) / math.sqrt(N)  # drives the modes' input directions
        stim = stim_gain * stim / np.linalg.norm(stim)
        probes = probe_gain * rng.standard_normal((N, n_probe)) / math.sqrt(N)
        self.B = np.concatenate([stim[:, None], probes], axis=1)  # (N, 1 + n_probe)

    def initial_state(self) -> np.ndarray:
        return self.C0.copy()

    def true_rule(self) -> np.ndarray:
        return self.RULES[self.rule].copy()

    def law(self, c: np.ndarray, ubar: float) -> np.ndarray:
        """c_{k+1} from c_k (R,) and ū_k."""
        return c + np.einsum("rj,rj->r", self.RULES[self.rule], library(c, ubar))

    def coefficients(self, state: np.ndarray) -> np.ndarray:
        return np.asarray(state, dtype=float)

    def connectivity(self, state: np.ndarray) -> np.ndarray:
        return np.einsum("r,ir,jr->ij", state, self.m, self.n)

    def simulate(self, state: np.ndarray, ubar: np.ndarray, rng: np.random.Generator) -> Sessions:
        ubar = np.asarray(ubar, dtype=float)
        cs = np.empty((len(ubar), self.R))
        c = np.asarray(state, dtype=float)
        for k, u in enumerate(ubar):  # the law depends on c and ū only: all sessions' W are known up front
            cs[k] = c
            c = self.law(c, u)
        W = np.einsum("kr,ir,jr->kij", cs, self.m, self.n)
        u = session_inputs(ubar, self.T, self.n_probe, self.dt, rng)
        return Sessions(y=self._record(W, u, rng), u=u, ubar=ubar, W=W, c=cs, state_end=c)

    def advance(self, state, ubar, rng=None):
        c = np.asarray(state, dtype=float)
        for u in np.asarray(ubar, dtype=float):
            c = self.law(c, u)
        return c


class BCMNetwork(_TanhNetwork):
    """Full-rank rate network whose synapses follow BCM plasticity with a sliding threshold, session by session.

    Slow state: (W (N, N), θ (N,)). After session k, with y = tanh(x) over its T steps:
    ΔW = η ⟨(y ⊙ (y - θ)) yᵀ⟩_t - λ (W - W_init), θ ← θ + (⟨y²⟩_t - θ) / τ_θ. The stimulation drives an assembly
    of ``n_assembly`` neurons, whose mutual synapses it potentiates until the threshold catches up.
    """

    shared = True
    c_label = "projection on the model's factors"

    def __init__(self, *, N: int = 30, dt: float = 0.1, T: int = 500, n_probe: int = 16, sigma_process: float = 0.03,
                 sigma_obs: float = 0.01, gain: float = 0.8, eta: float = 0.05, decay: float = 0.05,
                 tau_theta: float = 2.0, n_assembly: int = 8, rng: np.random.Generator | None = None):
        check_int("N", N, 6)
        check_int("T", T, 2)
        check_int("n_probe", n_probe, 0)
        check_real("dt", dt, 1e-4, 1.0)
        check_real("eta", eta, 0.0, 100.0)
        check_real("decay", decay, 0.0, 1.0)
        check_real("tau_theta", tau_theta, 1.0, 1e6)
        check_int("n_assembly", n_assembly, 1)
        super().__init__(N, dt, T, n_probe, sigma_process, sigma_obs)
        rng = np.random.default_rng(0) if rng is None else rng
        self.name, self.R = "bcm_network", 2
        self.eta, self.decay, self.tau_theta = eta, decay, tau_theta
        self.W_init = gain * rng.standard_normal((N, N)) / math.sqrt(N)
        stim = np.zeros(N)
        stim[: min(n_assembly, N)] = 1.5
        probes = rng.standard_normal((N, n_probe)) / math.sqrt(N) * 3.0
        self.B = np.concatenate([stim[:, None], probes], axis=1)
        self.theta0 = np.full(N, 0.1)

    def initial_state(self) -> tuple[np.ndarray, np.ndarray]:
        return self.W_init.copy(), self.theta0.copy()

    def coefficients(self, state) -> np.ndarray:
        return np.full(self.R, np.nan)  # no true low-rank coefficients: compare via connectivity

    def connectivity(self, state) -> np.ndarray:
        return state[0]

    def distance(self, state, target) -> float:
        return float(np.linalg.norm(state[0] - target[0]))

    def plasticity(self, state, y: np.ndarray):
        """The slow state after a session with rates y (T, N)."""
        W, theta = state
        post = y * (y - theta)  # (T, N)
        dW = self.eta * post.T @ y / y.shape[0] - self.decay * (W - self.W_init)
        theta = theta + ((y**2).mean(axis=0) - theta) / self.tau_theta
        return W + dW, theta

    def simulate(self, state, ubar: np.ndarray, rng: np.random.Generator) -> Sessions:
        ubar = np.asarray(ubar, dtype=float)
        K = len(ubar)
        u = session_inputs(ubar, self.T, self.n_probe, self.dt, rng)
        ys, Ws = np.empty((K, self.T + 1, self.N)), np.empty((K, self.N, self.N))
        for k in range(K):  # plasticity depends on the activity: one session after the other
            Ws[k] = state[0]
            ys[k] = self._record(state[0][None], u[k: k + 1], rng)[0]
            state = self.plasticity(state, np.tanh(ys[k]))
        return Sessions(y=ys, u=u, ubar=ubar, W=Ws, c=np.full((K, self.R), np.nan), state_end=state)

