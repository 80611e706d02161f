"""The paper's SSM layer, its hand-built constructions in float32 and in int8, and the trainable one-layer models.

Every model here is the layer ``h_t = gate(x_t) ⊙ h_{t-1} + inc(x_t)`` (``h_0 = 0``) read out per position by
``z_t = φ(h_t, x_t)``. The hand-built constructions set ``gate`` and ``inc`` by hand and read out by a fixed rule; the
trainable :class:`OneLayerSSM` learns tables ``gate[x]``, ``inc[x]`` of one gating class and a ReLU MLP ``φ``.

Precision. ``float32`` runs the recurrence through :func:`kernels.linear_scan` (complex64 for rotations); ``int8``
through :func:`kernels.saturating_scan` (``h_t = clamp(gate h_{t-1} + inc, -128, 127)``, exact integers): explicit
fixed width, because float32 over short words behaves like unbounded precision (a decaying memory keeps every
position apart until its values underflow). The time-invariant controls, whose gates lie strictly between 0 and 1,
run in int8 as 8-bit fixed point (:func:`fixed_point_scan`: the same 256 states, scaled by a power of two); the
complex rotations have no int8 form.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

import kernels

__all__ = ["CLASSES", "CONSTRUCTIONS", "HORIZON_LIMIT", "LOOKUP_WIDTH", "PRECISIONS", "Construction", "OneLayerSSM",
           "Run", "build", "construction_tables", "expressible", "fixed_point_scan", "since_horizon", "scan"]

PRECISIONS = ("float32", "int8")
#: the trainable gating classes: time-invariant complex diagonal; input-gated real diagonal in (0, 1) (sigmoid);
#: input-gated real diagonal in (-1, 1) (tanh: negative values allowed)
CLASSES = ("lti", "gate01", "gate11")


def scan(gate: np.ndarray, inc: np.ndarray, precision: str) -> np.ndarray:
    """``h_t = gate_t ⊙ h_{t-1} + inc_t`` from ``h = 0``, in float32 (complex64 if complex) or saturating int8.

    Arguments:
        gate: ``(n, length, d)`` or broadcastable (a time-invariant gate: ``(1, 1, d)``). inc: ``(n, length, d)``.
        precision: ``float32`` or ``int8`` (integer-valued gates and increments only).
    Returns:
        h ``(n, length, d)``: complex128, float64 or int64 numpy holding the float32 / int8 values exactly.
    """
    gate = np.broadcast_to(gate, inc.shape)
    if precision == "float32":
        dtype = torch.complex64 if np.iscomplexobj(gate) or np.iscomplexobj(inc) else torch.float32
        a = torch.as_tensor(np.array(gate)).to(dtype)
        b = torch.as_tensor(np.array(inc)).to(dtype)
        with torch.no_grad():
            h = kernels.linear_scan(a, b, dim=1).numpy()
        return h.astype(np.complex128 if h.dtype == np.complex64 else np.float64)
    if precision != "int8":
        raise ValueError(f"precision={precision!r} is not allowed; allowed: one of {PRECISIONS}")
    if np.iscomplexobj(gate) or np.any(gate != np.round(gate)) or np.any(inc != np.round(inc)):
        raise ValueError("this construction has non-integer gates or increments: it has no int8 form")
    a = torch.as_tensor(np.array(np.moveaxis(gate, 1, -1)), dtype=torch.int64)  # (n, d, length)
    b = torch.as_tensor(np.array(np.moveaxis(inc, 1, -1)), dtype=torch.int64)
    return np.moveaxis(kernels.saturating_scan(a, b, bits=8).numpy(), -1, 1)


def fixed_point_scan(gate: float, inc: np.ndarray, bound: float, bits: int = 8) -> np.ndarray:
    """``h_t = gate h_{t-1} + inc_t`` from ``h = 0`` with a time-invariant real gate, in signed fixed point of
    ``bits`` bits: the fewest integer bits that hold ``bound``, the rest fractional; every product rounded to the
    nearest step (ties to even) and clamped to the range, as a ``bits``-bit accumulator does.

    Arguments:
        gate: the gate (a real number; rounded to the grid). inc: ``(n, length, d)`` increments.
        bound: the largest ``|h_t|`` with exact numbers (it sets the split between integer and fractional bits).
    Returns:
        h ``(n, length, d)`` float64 holding the fixed-point values exactly (integers / 2^fractional bits).
    """
    frac = bits - 1 - max(0, math.ceil(math.log2(bound)))
    scale, lo, hi = 2.0 ** frac, -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    g, q = round(gate * scale), np.round(np.asarray(inc, dtype=np.float64) * scale)
    out, h = np.empty_like(q), np.zeros(q.shape[:1] + q.shape[2:])
    for t in range(q.shape[1]):
        h = np.clip(np.round(g * h / scale) + q[:, t], lo, hi)
        out[:, t] = h
    return out / scale


def _onehot(x: np.ndarray, k: int) -> np.ndarray:
    """``(n, length)`` tokens -> ``(n, length, k)`` float64 indicators."""
    return (x[..., None] == np.arange(k)).astype(np.float64)


@dataclass(frozen=True)
class Run:
    """A construction on a batch of words.

    Attributes:
        states: ``(n, length, d)`` real states (a complex channel appears as its real and imaginary parts).
        accept: ``(n, length)`` bool, the decision on every prefix. names: the state channels' names.
    """

    states: np.ndarray
    accept: np.ndarray
    names: tuple[str, ...]


def _run(h: np.ndarray, names: list[str], accept: np.ndarray) -> Run:
    """A :class:`Run` of states ``h`` (a complex channel split into its real and imaginary parts)."""
    if np.iscomplexobj(h):
        parts = np.concatenate([h.real, h.imag], axis=-1)
        return Run(parts, accept, tuple([f"Re {n}" for n in names] + [f"Im {n}" for n in names]))
    return Run(h.astype(np.float64), accept, tuple(names))


# ------------------------------------------------------------------------------------------------------------------
# Hand-built constructions (tokens: the alphabet's order in lab.datasets.languages)
# ------------------------------------------------------------------------------------------------------------------
def since(x: np.ndarray, precision: str = "float32") -> Run:
    """``b S a`` with an input gate: gate = [x = b], inc = [x = a]; accept iff h > 0.

    An ``a`` sets h = 1, a ``b`` keeps h, a ``c`` clears it: h is the formula's truth value, in {0, 1}."""
    oh = _onehot(x, 3)
    h = scan(oh[..., 1:2], oh[..., 0:1], precision)
    return _run(h, ["since"], h[..., 0] > 0)


def lti_since(x: np.ndarray, precision: str = "float32", decay: float = 0.4) -> Run:
    """A time-invariant attempt at ``b S a``: two decaying memories h^a, h^c (gate = decay < 1/2, inc = [x = a],
    [x = c]); accept iff x ≠ c and h^a > h^c.

    With exact reals the latest of a and c dominates (``λ^k > Σ_{i>k} λ^i`` for λ < 1/2), so this is right at every
    length; in float32 both memories underflow to 0 after a run of about ``log(1e-45) / log λ`` b's (≈ 113 at
    λ = 0.4) and it rejects; in int8 (8-bit fixed point, 6 fractional bits at λ = 0.4) they round to 0 after a run
    of 6 b's. The run it gets right grows with the bits: a fixed width bounds it. The paper: time-invariant SSMs of
    fixed width cannot express Since."""
    oh = _onehot(x, 3)
    if precision == "int8":
        h = fixed_point_scan(decay, oh[..., [0, 2]], 1.0 / (1.0 - decay))
    else:
        h = scan(np.full((1, 1, 2), decay), oh[..., [0, 2]], precision)
    return _run(h, ["h_a", "h_c"], (x != 2) & (h[..., 0] > h[..., 1]))


def lti_rotation(x: np.ndarray, precision: str = "float32", modulus: int = 2) -> Run:
    """Length mod m by a rotation, time-invariant: h_t = ω h_{t-1} + 1 (ω = e^{2πi/m}), so
    ``h_t = (1 - ω^t) / (1 - ω)``, 0 exactly when t ≡ 0 (mod m) and of modulus >= 1 otherwise; accept iff |h| < 1/2.
    (aa)* is m = 2: ω = -1, h alternates 1, 0, which int8 holds exactly."""
    inc = np.ones(x.shape + (1,))
    if modulus == 2:
        gate = np.full((1, 1, 1), -1.0)
    elif precision == "int8":
        raise ValueError(f"a rotation by 2π/{modulus} is not an integer: no int8 form (only m = 2)")
    else:
        gate = np.full((1, 1, 1), np.exp(2j * np.pi / modulus))
    h = scan(gate, inc, precision)
    return _run(h, ["rotation"], np.abs(h[..., 0]) < 0.5)


def gated_rotation(x: np.ndarray, precision: str = "float32", modulus: int = 2) -> Run:
    """#a mod m by an input-gated rotation: gate(a) = ω, gate(b) = 1, inc(a) = 1 - ω, inc(b) = 0, so
    ``h_t = 1 - ω^{#a}``; accept iff |h| < sin(π/m) (half the smallest non-zero |1 - ω^k|). Complex gates for
    m >= 3; for m = 2 the gate is -1 (negative, real), exact in int8."""
    is_a = (x == 0)[..., None]
    omega = -1.0 if modulus == 2 else np.exp(2j * np.pi / modulus)
    if precision == "int8" and modulus != 2:
        raise ValueError(f"a rotation by 2π/{modulus} is not an integer: no int8 form (only m = 2)")
    gate = np.where(is_a, omega, 1.0)
    inc = np.where(is_a, 1.0 - omega, 0.0)
    h = scan(gate, inc, precision)
    return _run(h, ["rotation"], np.abs(h[..., 0]) < math.sin(math.pi / modulus))


def decay_parity(x: np.ndarray, precision: str = "float32", gate: float = 0.9) -> Run:
    """(aa)* with a gate in (0, 1) and a generous readout (the control of the rotation): h_t = g h_{t-1} + 1, so
    ``h_t = (1 - g^t) / (1 - g)`` is strictly increasing; the readout inverts it, t = log(1 - (1 - g) h) / log g,
    and accepts iff t is even. It is right while float32 still tells h_t from h_{t+1} (g^t above the resolution of
    float32 near 1 / (1 - g): ~115 steps at g = 0.9) and wrong after: a contracting gate forgets the length.
    In int8 (8-bit fixed point, 3 fractional bits at g = 0.9) the states reach their fixed point within a few dozen
    steps; the readout is then the most generous one, a table from each state to the parity of the first position
    that reached it, and is wrong on every other position once two positions share a state."""
    if precision == "int8":
        h = fixed_point_scan(gate, np.ones(x.shape + (1,)), 1.0 / (1.0 - gate))
        return _run(h, ["decay"], _first_seen_parity(h[..., 0]))
    if precision != "float32":
        raise ValueError(f"precision={precision!r} is not allowed; allowed: one of {PRECISIONS}")
    h = scan(np.full((1, 1, 1), gate), np.ones(x.shape + (1,)), precision)
    u = 1.0 - (1.0 - gate) * h[..., 0].astype(np.float32).astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(u > 0, np.log(np.where(u > 0, u, 1.0)) / math.log(gate), np.nan)
    accept = np.isfinite(t) & (np.round(np.nan_to_num(t, nan=1.0)) % 2 == 0)
    return _run(h, ["decay"], accept)


def _first_seen_parity(h: np.ndarray) -> np.ndarray:
    """``(n, length)`` states -> accept iff the first position (1-based) of that word reaching the state is even."""
    accept = np.empty(h.shape, dtype=bool)
    for i, row in enumerate(h):
        values, first = np.unique(row, return_index=True)
        accept[i] = (first[np.searchsorted(values, row)] + 1) % 2 == 0
    return accept


def counter_anbncn(x: np.ndarray, precision: str = "float32") -> Run:
    """a^n b^n c^n with counters (A = 1) in two layers.

    Layer 1 (star-free order check): s = #non-a so far, r = #c so far (A = 1; any positive value means "seen", so
    saturation does no harm); z_t = [x = a and s > 0] or [x = b and r > 0] (a letter out of a*b*c* order).
    Layer 2: v = Σ z (violations), c1 = #a - #b, c2 = #b - #c (A = 1, inc ±1). Accept iff v = c1 = c2 = 0. In
    float32 the counters are exact to 2^24; in int8 they saturate at 127, so a^128 b^128 c^128 ends at c1 = -1."""
    oh = _onehot(x, 3)
    one = np.ones((1, 1, 2))
    flags = scan(one, np.stack([1 - oh[..., 0], oh[..., 2]], axis=-1), precision)
    z = ((x == 0) & (flags[..., 0] > 0)) | ((x == 1) & (flags[..., 1] > 0))
    inc = np.stack([z.astype(np.float64), oh[..., 0] - oh[..., 1], oh[..., 1] - oh[..., 2]], axis=-1)
    h = scan(np.ones((1, 1, 3)), inc, precision)
    accept = (h[..., 0] == 0) & (h[..., 1] == 0) & (h[..., 2] == 0)
    states = np.concatenate([flags, h], axis=-1)
    return _run(states, ["non-a seen", "c seen", "violations", "#a - #b", "#b - #c"], accept)


def counter_dyck1(x: np.ndarray, precision: str = "float32") -> Run:
    """Dyck-1 with a counter (A = 1) in two layers: depth d = #( - #); then v = Σ [d_t < 0]; accept iff d = v = 0.
    int8 saturates at depth 127."""
    d = scan(np.ones((1, 1, 1)), np.where(x == 0, 1.0, -1.0)[..., None], precision)
    v = scan(np.ones((1, 1, 1)), (d < 0).astype(np.float64), precision)
    accept = (d[..., 0] == 0) & (v[..., 0] == 0)
    return _run(np.concatenate([d, v], axis=-1), ["depth", "below zero"], accept)


@dataclass(frozen=True)
class Construction:
    """A hand-built model: its language, its gating class in words, its precisions and its function."""

    language: str
    kind: str
    precisions: tuple[str, ...]
    fn: Callable[..., Run]

    def __call__(self, x: np.ndarray, precision: str = "float32", **params) -> Run:
        return self.fn(np.asarray(x, dtype=np.int64), precision, **params)


CONSTRUCTIONS: dict[str, Construction] = {
    "since": Construction("b_since_a", "input-gated, gates {0, 1}", PRECISIONS, since),
    "lti_since": Construction("b_since_a", "time-invariant, decay < 1/2", PRECISIONS, lti_since),
    "lti_rotation": Construction("aa_star", "time-invariant rotation by π", PRECISIONS, lti_rotation),
    "decay_parity": Construction("aa_star", "gate in (0, 1), position decoded", PRECISIONS, decay_parity),
    "gated_rotation": Construction("mod_count", "input-gated rotation (negative / complex)", PRECISIONS,
                                   gated_rotation),
    "counter": Construction("anbncn", "counters A = 1 (two layers)", PRECISIONS, counter_anbncn),
    "dyck_counter": Construction("dyck1", "counter A = 1 (two layers)", PRECISIONS, counter_dyck1),
}


#: width σ of the count lookup's bumps (:class:`OneLayerSSM`): states a whole count apart barely overlap
LOOKUP_WIDTH = 0.35
#: the longest run of b's the float32 horizon is looked for (beyond: NaN, none found)
HORIZON_LIMIT = 100_000


def since_horizon(gate: np.ndarray, inc: np.ndarray, limit: int = HORIZON_LIMIT) -> float:
    """The float32 horizon of a layer on b S a: the shortest run of b's after which the states that follow an a and
    a c (from h = 0) differ, in every state channel (real and imaginary parts apart) and at every longer run, by
    less than float32 resolves at their size (half an ulp, 2^-24 of the larger |value|, or less than the smallest
    subnormal, 2^-149): from there on float32 holds the same numbers after both letters and no readout can tell
    ``b S a`` from its negation. Computed in float64 from the closed form ``h_k = g^k (h_0 - h*) + h*``
    (``h* = inc(b) / (1 - g)``; ``h_0 + k inc(b)`` where the gate is exactly 1).

    Arguments:
        gate, inc: ``(3, d)`` gate and increment of the letters a, b, c (float32 values; complex allowed).
    Returns:
        the horizon in letters (b's), or NaN when the two states stay apart up to ``limit`` b's.
    """
    gate, inc = np.asarray(gate, dtype=np.complex128), np.asarray(inc, dtype=np.complex128)
    g, k = gate[1], np.arange(limit + 1, dtype=np.float64)[:, None]
    unit = g == 1
    fixed = np.where(unit, 0, inc[1] / np.where(unit, 2, 1 - g))
    with np.errstate(under="ignore", over="ignore", invalid="ignore"):
        power = g[None, :] ** k
        ha = np.where(unit, inc[0] + k * inc[1], power * (inc[0] - fixed) + fixed)
        hc = np.where(unit, inc[2] + k * inc[1], power * (inc[2] - fixed) + fixed)
    lost = np.ones(len(k), dtype=bool)
    for part in (np.real, np.imag):
        a, c = part(ha), part(hc)
        gap = np.abs(a - c)
        lost &= np.all((gap < 2.0 ** -24 * np.maximum(np.abs(a), np.abs(c))) | (gap < 2.0 ** -149), axis=1)
    if not lost[-1]:
        return float("nan")
    kept = np.flatnonzero(~lost)
    return float(kept[-1] + 1) if kept.size else 0.0


def construction_tables(name: str, decay: float = 0.4) -> tuple[np.ndarray, np.ndarray]:
    """Gate and increment ``(3, d)`` of the letters a, b, c of a hand-built b S a construction (``since``,
    ``lti_since``), as :func:`since_horizon` takes them."""
    if name == "since":
        return np.array([[0.0], [1.0], [0.0]]), np.array([[1.0], [0.0], [0.0]])
    if name == "lti_since":
        return np.full((3, 2), np.float32(decay)), np.array([[1.0, 0.0], [0.0, 0.0], [0.0, 1.0]])
    raise ValueError(f"name={name!r} is not allowed; allowed: one of ('since', 'lti_since')")


def expressible(language: str, kind: str, modulus: int = 2) -> bool:
    """Whether the paper says one fixed-width layer of gating class ``kind`` can recognise ``language``.

    (aa)*: not with real gates in (0, 1) (the paper's separation), yes with a rotation by π (time-invariant) or a
    gate -1. Parity (#a mod 2): needs an input-dependent negative gate (not in the time-invariant or (0, 1)
    classes, whose languages are in AC0; parity is not); #a mod m >= 3 needs complex gates (not gate11). b S a:
    input gates express it; time-invariant fixed-width layers cannot."""
    table = {"aa_star": {"lti": True, "gate01": False, "gate11": True},
             "mod_count": {"lti": False, "gate01": False, "gate11": modulus == 2},
             "b_since_a": {"lti": False, "gate01": True, "gate11": True}}
    return table[language][kind]


# ------------------------------------------------------------------------------------------------------------------
# Trainable one-layer models
# ------------------------------------------------------------------------------------------------------------------
class OneLayerSSM(nn.Module):
    """One SSM layer of a gating class and a ReLU readout: logits of prefix membership at every position.

    Arguments:
        vocab: alphabet size.
        kind: ``lti`` (gate = λ, the same at every step: the eigenvalues of a real matrix, half real ``tanh(ρ)`` in
            (-1, 1), half complex ``exp(-exp(ν) + iθ)``; inc = B[x] complex), ``gate01`` (gate = sigmoid(G[x]) in
            (0, 1), real), ``gate11`` (gate = tanh(G[x]) in (-1, 1)).
        d_state: state channels (complex for ``lti``). d_hidden: width of the readout MLP φ(h_t, x_t).
        lookup: 0, or the largest count ``C`` of a *count lookup* added to the readout's logits: a learned table
            of logits for each integer k in ``[-C, C]`` and each state channel, read through bumps
            ``exp(-(s h - k)² / 2σ²)`` (σ = :data:`LOOKUP_WIDTH`, s a learned stretch per channel, 1 at start): a
            readout that tells a count t from t + 1 (a ReLU MLP over a growing count fits the sawtooth of its
            parity poorly). It is finite and learned only where training put the states, so it reads a count as
            far as the training words went and no further. A ``gate01`` model with a lookup starts where a count
            lives: gate logits in (3, 7) (gates 0.95 to 0.999) and increments ±1.
    """

    def __init__(self, vocab: int, kind: str, d_state: int = 8, d_hidden: int = 32, lookup: int = 0):
        super().__init__()
        if kind not in CLASSES:
            raise ValueError(f"kind={kind!r} is not allowed; allowed: one of {CLASSES}")
        self.kind, self.vocab, self.d_state = kind, vocab, d_state
        if kind == "lti":
            n_real = d_state // 2
            self.rho = nn.Parameter(torch.empty(n_real).uniform_(-3.0, 3.0))  # real eigenvalues tanh(ρ)
            radius = torch.empty(d_state - n_real).uniform_(0.8, 0.99)
            self.nu = nn.Parameter(torch.log(-torch.log(radius)))  # complex ones: |λ| = exp(-exp(ν)), angle θ
            self.theta = nn.Parameter(torch.empty(d_state - n_real).uniform_(0, 2 * math.pi))
            self.inc_re = nn.Parameter(torch.randn(vocab, d_state) / math.sqrt(2))
            self.inc_im = nn.Parameter(torch.randn(vocab, d_state) / math.sqrt(2))
            features = 2 * d_state
        else:
            lo, hi = ((3.0, 7.0) if lookup else (0.0, 4.0)) if kind == "gate01" else (-3.0, 3.0)
            self.gate_logit = nn.Parameter(torch.empty(vocab, d_state).uniform_(lo, hi))
            inc = torch.randn(vocab, d_state)
            self.inc = nn.Parameter(torch.sign(inc) if lookup and kind == "gate01" else inc)
            features = d_state
        self.readout = nn.Sequential(nn.Linear(features + vocab, d_hidden), nn.ReLU(), nn.Linear(d_hidden, 2))
        self.lookup = lookup
        if lookup:
            self.lookup_table = nn.Parameter(torch.zeros(features, 2 * lookup + 1, 2))
            self.lookup_scale = nn.Parameter(torch.zeros(features))  # log of each channel's stretch

    def gates(self, x: torch.Tensor) -> torch.Tensor:
        """gate(x_t): ``(n, length)`` tokens -> ``(n, length, d_state)`` (lti: ``(1, 1, d_state)`` complex)."""
        if self.kind == "lti":
            lam = torch.cat([torch.complex(torch.tanh(self.rho), torch.zeros_like(self.rho)),
                             torch.polar(torch.exp(-torch.exp(self.nu)), self.theta)])
            return lam.to(torch.complex64)[None, None, :]
        g = self.gate_logit[x]
        return torch.sigmoid(g) if self.kind == "gate01" else torch.tanh(g)

    def states(self, x: torch.Tensor) -> torch.Tensor:
        """h: ``(n, length)`` tokens -> ``(n, length, d_state)`` (complex64 for lti, float32 otherwise)."""
        if self.kind == "lti":
            inc = torch.complex(self.inc_re[x], self.inc_im[x])  # (n, length, d_state)
            return kernels.linear_scan(self.gates(x).expand_as(inc).contiguous(), inc, dim=1)
        return kernels.linear_scan(self.gates(x), self.inc[x], dim=1)

    def features(self, h: torch.Tensor) -> torch.Tensor:
        """The readout's view of the state: ``(n, length, d)`` real (lti: real and imaginary parts)."""
        return torch.cat([h.real, h.imag], dim=-1) if h.is_complex() else h

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits ``(n, length, 2)`` of "the prefix through t is a member"."""
        h = self.features(self.states(x))
        logits = self.readout(torch.cat([h, F.one_hot(x, self.vocab).to(h.dtype)], dim=-1))
        if not self.lookup:
            return logits
        centres = torch.arange(-self.lookup, self.lookup + 1, dtype=h.dtype, device=h.device)
        u = h * torch.exp(self.lookup_scale)
        bumps = torch.exp(-0.5 * ((u[..., None] - centres) / LOOKUP_WIDTH) ** 2)  # (n, length, features, 2C + 1)
        return logits + torch.einsum("nlfk,fkc->nlc", bumps, self.lookup_table)


def build(vocab: int, kind: str, d_state: int, d_hidden: int, lookup: int = 0) -> OneLayerSSM:
    """A freshly initialised :class:`OneLayerSSM` (seed the generators first)."""
    return OneLayerSSM(vocab, kind, d_state, d_hidden, lookup)

