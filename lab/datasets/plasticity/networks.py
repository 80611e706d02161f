r"""Plasticity benchmarks with known ground truth: networks whose connectivity drifts across sessions under a slow
law driven by a stimulation schedule (STEER, arXiv 2603.00213).

A *session* k is one recording of T steps of fast dynamics with fixed connectivity W_k. Between sessions the
connectivity changes under a slow law driven by the session's stimulation summary ū_k (the mean of the
plasticity-inducing stimulation over the session). Four benchmarks:

``lowrank_linear``
    A rate network, fast dynamics (Euler-Maruyama, the model's own form)

        x_{t+1} = x_t + dt (-x_t + W_k tanh(x_t) + B u_t) + sqrt(dt) σ_p ξ_t,      y_t = x_t + σ_o ε_t,

    with low-rank connectivity W_k = Σ_r c_{k,r} m_r n_rᵀ (orthonormal m's, orthonormal n's, overlap m_r·n_r = 0.5)
    and a linear-plus-interaction law per component (stimulation potentiates mode 1 and depresses mode 2):
    c_{k+1,r} = c_{k,r} + a_r ū_k - b_r (c_{k,r} - c*_r) + γ_r c_{k,r} ū_k.
``lowrank_bcm``
    The same network with a BCM-like law: a Hebbian term η c ū (the mode's strength times the stimulation) set
    against a threshold c/θ that slides up with the mode's own strength, so that potentiation turns into depression
    once the mode outgrows the drive, plus a slow decay: c_{k+1,r} = c_{k,r} + η_r c_{k,r} (ū_k - c_{k,r}/θ_r)
    - λ_r (c_{k,r} - c*_r).
``lorenz``
    A stimulated Lorenz system (σ = 10, β = 8/3) whose ρ drifts, ρ_{k+1} = ρ_k + a ū_k - b (ρ_k - ρ*), integrated
    with RK4 and recorded in normalised coordinates x̃ = (x - μ) / s. In those coordinates the vector field is a
    quadratic polynomial, so W_k acts on the features φ(x̃) = [x̃, quadratic monomials of x̃] (P = 9) and
    W_k = W_0 + ρ_k (s_x / s_y) e_y e_xᵀ: a shared part plus a rank-one change.
``bcm_network``
    Off the model's assumptions: a full-rank rate network whose every synapse follows BCM plasticity with a sliding
    threshold, applied to the session's activity, ΔW_ij = η ⟨y_i (y_i - θ_i) y_j⟩ - λ (W_ij - W_ij^init),
    θ_i ← θ_i + (⟨y_i²⟩ - θ_i) / τ_θ, y = tanh(x). The change is not low rank and depends on a hidden state θ.

The rules of the first three benchmarks are sparse in one library of candidate terms per component,
Θ(c, ū) = [1, c, ū, c·ū, c²] (:data:`LIBRARY_TERMS`): Δc_r = Ξ_r · Θ(c_r, ū) with a known Ξ
(:meth:`PlasticityBenchmark.true_rule`; ``None`` for ``bcm_network``). The low-rank rules use four of the five terms,
a different four for the linear and the BCM-like laws; the Lorenz rule uses three.

Inputs: channel 0 of u_t is the plasticity-inducing stimulation, a square pulse train of height ~2 ū_k that is on
half of each ``pulse_period`` steps (its session mean is exactly ū_k); channels 1..n_probe are known probe inputs
(Ornstein-Uhlenbeck, unit variance, time constant 1) that excite the network in every session, stimulated or not,
as test pulses do in a plasticity experiment.

Shapes (:class:`Sessions`): recorded activity ``y`` (K, T+1, N), inputs ``u`` (K, T, S), stimulation summaries
``ubar`` (K,), true connectivity ``W`` (K, N, P) in the recorded (normalised) coordinates, true coefficients ``c``
(K, R). Everything is drawn from a :class:`numpy.random.Generator`, so a seed fixes a benchmark. Generation takes
well under a second, so nothing is cached on disk.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

BENCHMARKS = ("lowrank_linear", "lowrank_bcm", "lorenz", "bcm_network")
PATTERNS = ("random", "constant", "periodic", "ramp", "burst", "silent")
LIBRARY_TERMS = ("1", "c", "u", "c*u", "c^2")
FEATURES = ("tanh", "poly2")


def _fail(name: str, value: Any, allowed: str) -> None:
    raise ValueError(f"{name}={value!r} is not allowed; {allowed}")


def _check_choice(name: str, value: Any, allowed) -> None:
    if value not in allowed:
        _fail(name, value, "allowed: " + ", ".join(map(repr, allowed)))


def _check_int(name: str, value: Any, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        _fail(name, value, f"expected an integer >= {minimum}")


def _check_number(name: str, value: Any, minimum: float = -math.inf, maximum: float = math.inf) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.number)) or not math.isfinite(value):
        _fail(name, value, "expected a finite number")
    if not minimum <= value <= maximum:
        _fail(name, value, f"allowed range [{minimum}, {maximum}]")


# --------------------------------------------------------------------------------------------------------------------
# Library of candidate terms and schedules
# --------------------------------------------------------------------------------------------------------------------
def library(c: np.ndarray, ubar: np.ndarray | float) -> np.ndarray:
    """Θ(c, ū) per component.

    Arguments:
        c: (..., R) coefficients; ubar: (...) stimulation summaries (or a scalar).
    Returns:
        (..., R, 5) the terms [1, c, ū, c·ū, c²] of :data:`LIBRARY_TERMS`.
    """
    c = np.asarray(c, dtype=float)
    return library_terms(c, np.asarray(ubar, dtype=float)[..., None])


def library_terms(c: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Θ elementwise: c and u broadcast together to shape (...), returns (..., 5)."""
    c, u = np.broadcast_arrays(np.asarray(c, dtype=float), np.asarray(u, dtype=float))
    return np.stack([np.ones_like(c), c, u, c * u, c**2], axis=-1)


def stimulation_schedule(
    pattern: str,
    n_sessions: int,
    *,
    amplitude: float = 1.0,
    period: int = 3,
    start: int = 0,
    levels: int = 5,
    rng: np.random.Generator | None = None,
) -> np.ndarray:
    """Stimulation summaries ū_k for ``n_sessions`` sessions.

    Patterns: ``random`` (levels amplitude·{0, 1/(levels-1), ..., 1} drawn at random and each held for 1 to
    ``period`` sessions, also at random; the training schedule), ``constant``
    (amplitude from session ``start`` on), ``periodic`` (blocks of ``period`` sessions on and off, from ``start``),
    ``ramp`` (0 to amplitude, linearly, from ``start``), ``burst`` (amplitude for ``period`` sessions from
    ``start``, then off), ``silent`` (no stimulation).

    Returns:
        (n_sessions,) float array in [0, amplitude].
    """
    _check_choice("pattern", pattern, PATTERNS)
    _check_int("n_sessions", n_sessions, 1)
    _check_number("amplitude", amplitude, 0.0, 10.0)
    _check_int("period", period, 1)
    _check_int("start", start, 0)
    _check_int("levels", levels, 2)
    k = np.arange(n_sessions)
    on = k >= start
    if pattern == "random":
        rng = np.random.default_rng() if rng is None else rng
        out: list[float] = []
        while len(out) < n_sessions:
            out += [amplitude * rng.integers(0, levels) / (levels - 1)] * int(rng.integers(1, period + 1))
        return np.array(out[:n_sessions])
    if pattern == "constant":
        return amplitude * on.astype(float)
    if pattern == "periodic":
        return amplitude * (on & (((k - start) // period) % 2 == 0)).astype(float)
    if pattern == "ramp":
        span = max(n_sessions - 1 - start, 1)
        return amplitude * np.clip((k - start) / span, 0.0, 1.0) * on
    if pattern == "burst":
        return amplitude * (on & (k < start + period)).astype(float)
    return np.zeros(n_sessions)


def session_inputs(ubar: np.ndarray, T: int, n_probe: int, dt: float, rng: np.random.Generator,
                   pulse_period: int = 50) -> np.ndarray:
    """Inputs of each session: the stimulation pulse train (channel 0) and the probe inputs.

    Arguments:
        ubar: (K,) stimulation summaries; T: steps per session; n_probe: probe channels; dt: step (time units).
    Returns:
        (K, T, 1 + n_probe); the mean of channel 0 over session k is ū_k.
    """
    ubar = np.asarray(ubar, dtype=float)
    K = ubar.shape[0]
    t = np.arange(T)
    on = ((t % pulse_period) < max(pulse_period // 2, 1)).astype(float)
    pulse = on / on.mean()  # (T,) on half of each period, height ~2, mean exactly 1
    stim = ubar[:, None] * pulse[None, :]  # (K, T)
    probe = np.empty((K, T, n_probe))
    a = math.exp(-dt)  # OU with unit variance and time constant 1
    z = rng.standard_normal((K, n_probe))
    for s in range(T):
        probe[:, s] = z
        z = a * z + math.sqrt(1 - a * a) * rng.standard_normal((K, n_probe))
    return np.concatenate([stim[..., None], probe], axis=-1)


def features(x: np.ndarray, kind: str) -> np.ndarray:
    """φ(x): ``tanh`` (P = N) or ``poly2`` (x and its quadratic monomials x_i x_j, i <= j; P = N + N(N+1)/2).

    Arguments:
        x: (..., N). Returns: (..., P).
    """
    if kind == "tanh":
        return np.tanh(x)
    if kind == "poly2":
        i, j = np.triu_indices(x.shape[-1])
        return np.concatenate([x, x[..., i] * x[..., j]], axis=-1)
    _fail("features", kind, "allowed: " + ", ".join(map(repr, FEATURES)))


def n_features(N: int, kind: str) -> int:
    return N if kind == "tanh" else N + N * (N + 1) // 2


# --------------------------------------------------------------------------------------------------------------------
# Sessions and the benchmarks
# --------------------------------------------------------------------------------------------------------------------
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
        _check_choice("rule", rule, tuple(self.RULES))
        _check_int("N", N, 6)
        _check_int("T", T, 2)
        _check_int("n_probe", n_probe, 0)
        _check_number("dt", dt, 1e-4, 1.0)
        _check_number("sigma_process", sigma_process, 0.0, 10.0)
        _check_number("sigma_obs", sigma_obs, 0.0, 10.0)
        _check_number("overlap", overlap, -1.0, 1.0)
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
        _check_int("N", N, 6)
        _check_int("T", T, 2)
        _check_int("n_probe", n_probe, 0)
        _check_number("dt", dt, 1e-4, 1.0)
        _check_number("eta", eta, 0.0, 100.0)
        _check_number("decay", decay, 0.0, 1.0)
        _check_number("tau_theta", tau_theta, 1.0, 1e6)
        _check_int("n_assembly", n_assembly, 1)
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


class PlasticLorenz(PlasticityBenchmark):
    """Stimulated Lorenz system whose ρ drifts from session to session (see the module docstring)."""

    feature = "poly2"
    shared = True
    c_label = "rho"
    SIGMA, BETA = 10.0, 8.0 / 3.0
    MU = np.array([0.0, 0.0, 37.0])  # normalisation: x̃ = (x - MU) / SCALE
    SCALE = np.array([8.0, 9.0, 10.0])

    def __init__(self, *, a: float = 3.0, b: float = 0.15, rho_star: float = 28.0, rho0: float = 30.0,
                 dt: float = 0.005, T: int = 800, n_probe: int = 2, substeps: int = 2, sigma_process: float = 0.05,
                 sigma_obs: float = 0.01, stim_gain: float = 8.0, rng: np.random.Generator | None = None):
        _check_number("a", a, -100.0, 100.0)
        _check_number("b", b, 0.0, 1.0)
        _check_number("rho0", rho0, 1.0, 200.0)
        _check_number("dt", dt, 1e-4, 0.05)
        _check_int("T", T, 2)
        _check_int("n_probe", n_probe, 0)
        _check_int("substeps", substeps, 1)
        rng = np.random.default_rng(0) if rng is None else rng
        self.name, self.N, self.R = "lorenz", 3, 1
        self.P = n_features(3, "poly2")
        self.a, self.b, self.rho_star, self.rho0 = a, b, rho_star, rho0
        self.dt, self.T, self.n_probe, self.substeps = dt, T, n_probe, substeps
        self.sigma_process, self.sigma_obs = sigma_process, sigma_obs
        stim = np.array([stim_gain, 0.0, 0.0])
        probes = rng.standard_normal((3, n_probe)) * 4.0
        self.B_phys = np.concatenate([stim[:, None], probes], axis=1)  # (3, S) in physical units

    def initial_state(self) -> float:
        return float(self.rho0)

    def true_rule(self) -> np.ndarray:
        return np.array([[self.b * self.rho_star, -self.b, self.a, 0.0, 0.0]])

    def law(self, rho: float, ubar: float) -> float:
        return rho + self.a * ubar - self.b * (rho - self.rho_star)

    def coefficients(self, state) -> np.ndarray:
        return np.array([float(state)])

    def distance(self, state, target) -> float:
        return abs(float(state) - float(target))

    def advance(self, state, ubar, rng=None):
        rho = float(state)
        for u in np.asarray(ubar, dtype=float):
            rho = self.law(rho, u)
        return rho

    def field(self, x: np.ndarray, rho: np.ndarray) -> np.ndarray:
        """Lorenz vector field, x: (..., 3), rho broadcastable to x[..., 0]."""
        X, Y, Z = x[..., 0], x[..., 1], x[..., 2]
        return np.stack([self.SIGMA * (Y - X), X * (rho - Z) - Y, X * Y - self.BETA * Z], axis=-1)

    def true_B(self) -> np.ndarray:
        return self.B_phys / self.SCALE[:, None]

    def _normalised_model(self, rho: float) -> tuple[np.ndarray, np.ndarray]:
        """(W (3, P), b (3,)) with f(μ + s x̃)/s + x̃ = W φ(x̃) + b exactly (the field is quadratic)."""
        pts = np.random.default_rng(1).standard_normal((64, 3))
        target = self.field(self.MU + self.SCALE * pts, rho) / self.SCALE + pts
        X = np.concatenate([features(pts, "poly2"), np.ones((64, 1))], axis=1)
        coef, *_ = np.linalg.lstsq(X, target, rcond=None)
        return coef[:-1].T, coef[-1]

    def connectivity(self, state) -> np.ndarray:
        return self._normalised_model(float(state))[0]

    def true_bias(self) -> np.ndarray:
        return self._normalised_model(self.rho0)[1]

    def _rk4(self, x, rho, drive, h):
        k1 = self.field(x, rho) + drive
        k2 = self.field(x + 0.5 * h * k1, rho) + drive
        k3 = self.field(x + 0.5 * h * k2, rho) + drive
        k4 = self.field(x + h * k3, rho) + drive
        return x + h / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4)

    def simulate(self, state, ubar: np.ndarray, rng: np.random.Generator) -> Sessions:
        ubar = np.asarray(ubar, dtype=float)
        K = len(ubar)
        rhos = np.empty(K)
        rho = float(state)
        for k, u in enumerate(ubar):
            rhos[k] = rho
            rho = self.law(rho, u)
        u = session_inputs(ubar, self.T, self.n_probe, self.dt, rng)
        h = self.dt / self.substeps
        x = np.array([1.0, 1.0, 20.0]) + 5.0 * rng.standard_normal((K, 3))
        for _ in range(int(3.0 / h)):  # 3 time units onto the attractor, unrecorded
            x = self._rk4(x, rhos, 0.0, h)
        xs = np.empty((K, self.T + 1, 3))
        drive = u @ self.B_phys.T  # (K, T, 3)
        for t in range(self.T):
            xs[:, t] = x
            for _ in range(self.substeps):
                x = self._rk4(x, rhos, drive[:, t], h)
            x = x + math.sqrt(self.dt) * self.sigma_process * self.SCALE * rng.standard_normal((K, 3))
        xs[:, self.T] = x
        y = (xs - self.MU) / self.SCALE + self.sigma_obs * rng.standard_normal(xs.shape)
        W = np.stack([self.connectivity(r) for r in rhos])
        return Sessions(y=y, u=u, ubar=ubar, W=W, c=rhos[:, None], state_end=rho)


def make_benchmark(name: str, *, N: int = 30, T: int | None = None, seed: int = 0, **options: Any
                   ) -> PlasticityBenchmark:
    """Build a benchmark by name (:data:`BENCHMARKS`), its fixed parts (factors, input matrix) drawn from ``seed``.

    Arguments:
        name: one of BENCHMARKS. N: units of the rate networks (the Lorenz system has 3). T: steps per session
        (default: 500 for the networks, 800 for Lorenz). options: passed to the benchmark's class.
    """
    _check_choice("benchmark", name, BENCHMARKS)
    rng = np.random.default_rng([seed, BENCHMARKS.index(name)])
    if name == "lorenz":
        return PlasticLorenz(rng=rng, **({} if T is None else {"T": T}), **options)
    if name == "bcm_network":
        return BCMNetwork(N=N, rng=rng, **({} if T is None else {"T": T}), **options)
    return LowRankPlasticNetwork(name.split("_", 1)[1], N=N, rng=rng, **({} if T is None else {"T": T}), **options)
