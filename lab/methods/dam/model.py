"""Dense associative memory (Krotov & Hopfield 2016) with the exact energy-difference update, in Numba.

Spins σ ∈ {±1}^N store P patterns ξ^μ ∈ {±1}^N with the energy

    E(σ) = -Σ_μ F(M_μ),      M_μ = ξ^μ · σ,      F(x) = x^n  (or e^x).

The exact rule sets each spin to the sign that lowers E, comparing the two values of σ_i with all other spins fixed:

    σ_i ← sgn Σ_μ [F(ξ_i^μ + h_μi) - F(-ξ_i^μ + h_μi)],      h_μi = M_μ - ξ_i^μ σ_i.

Evaluating h_μi from scratch costs O(N) for each (μ, i), so O(N²P) a sweep. Two facts make it O(NP):
F(ξ + h) - F(-ξ + h) = ξ g(h) with g(h) = F(h + 1) - F(h - 1), and u = ξ_i^μ σ_i is ±1, so any function of
h = M - u is a(M) + u b(M). Hence the field on spin i is

    f_i = Σ_μ ξ_i^μ g(M_μ - ξ_i^μ σ_i) = Σ_μ ξ_i^μ a(M_μ) + σ_i Σ_μ b(M_μ),
    a(M) = (F(M + 2) - F(M - 2)) / 2,      b(M) = (2 F(M) - F(M + 2) - F(M - 2)) / 2,

one matrix product over patterns per sweep. For F = x^n, a and b are written out as polynomials in M (binomial
expansion) to avoid cancellation; for F = e^x a common factor e^{-max M} keeps them finite without changing signs.
Everything runs in float64 (x^4 of M ~ N overflows nothing, but float32 would lose the field's sign).
A field of exactly zero leaves the spin unchanged.
"""

from __future__ import annotations

from math import comb

import numba as nb
import numpy as np

KIND_POWER = 0
KIND_EXP = 1


def _ab_coefficients(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Polynomial coefficients (in powers of M, index = power) of a(M) and b(M) for F(x) = x^n."""
    a = np.zeros(n + 1)
    b = np.zeros(n + 1)
    for k in range(1, n + 1):
        c = comb(n, k) * 2.0**k
        if k % 2 == 1:
            a[n - k] += c  # (F(M+2) - F(M-2)) / 2 keeps the odd powers of 2
        else:
            b[n - k] -= c  # (2F(M) - F(M+2) - F(M-2)) / 2 keeps the even ones, negated
    return a, b


@nb.njit(cache=True)
def _poly(coef: np.ndarray, x: float) -> float:
    acc = 0.0
    for k in range(coef.shape[0] - 1, -1, -1):
        acc = acc * x + coef[k]
    return acc


@nb.njit(cache=True)
def _ab_values(M: np.ndarray, kind: int, acoef: np.ndarray, bcoef: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """a(M) (B, P) and Σ_μ b(M_μ) (B,) for a batch of overlaps M (B, P)."""
    B, P = M.shape
    A = np.empty((B, P))
    bsum = np.zeros(B)
    for r in range(B):
        shift = 0.0
        if kind == KIND_EXP:
            shift = M[r, 0]
            for mu in range(P):
                shift = max(shift, M[r, mu])
            shift += 2.0
        acc = 0.0
        for mu in range(P):
            m = M[r, mu]
            if kind == KIND_POWER:
                A[r, mu] = _poly(acoef, m)
                acc += _poly(bcoef, m)
            else:
                ep = np.exp(m + 2.0 - shift)
                em = np.exp(m - 2.0 - shift)
                e0 = np.exp(m - shift)
                A[r, mu] = 0.5 * (ep - em)
                acc += 0.5 * (2.0 * e0 - ep - em)
        bsum[r] = acc
    return A, bsum


@nb.njit(cache=True)
def _add_self_term(F: np.ndarray, sigma: np.ndarray, bsum: np.ndarray) -> None:
    for r in range(sigma.shape[0]):
        for i in range(sigma.shape[1]):
            F[r, i] += sigma[r, i] * bsum[r]


def _fields(xi: np.ndarray, sigma: np.ndarray, M: np.ndarray, kind: int, acoef, bcoef) -> np.ndarray:
    """Exact local fields f (B, N) for states sigma (B, N), patterns xi (P, N), overlaps M = sigma xi^T (B, P).

    The two element-wise passes run in Numba; the product over patterns is a float64 BLAS matrix product, written
    as (ξ^T A^T)^T: OpenBLAS ran A @ ξ, a few rows against a long inner dimension P, up to 10x slower (the same
    numbers: the fields of F = x^n are integers, exact in float64).
    """
    A, bsum = _ab_values(M, kind, acoef, bcoef)
    F = np.ascontiguousarray((xi.T @ A.T).T)  # (B, N): Σ_μ a(M_μ) ξ_i^μ
    _add_self_term(F, sigma, bsum)
    return F


@nb.njit(cache=True)
def _sign_update(sigma: np.ndarray, f: np.ndarray) -> np.ndarray:
    out = sigma.copy()
    for r in range(sigma.shape[0]):
        for i in range(sigma.shape[1]):
            if f[r, i] > 0.0:
                out[r, i] = 1.0
            elif f[r, i] < 0.0:
                out[r, i] = -1.0
    return out


def _sync_step(xi, sigma, kind, acoef, bcoef):
    M = sigma @ xi.T  # (B, P) overlaps, exact integers in float64
    return _sign_update(sigma, _fields(xi, sigma, M, kind, acoef, bcoef))


@nb.njit(parallel=True, cache=True)
def _async_sweep(xi, sigma, order, kind, acoef, bcoef):
    """One asynchronous sweep per state: spins visited in ``order`` (B, N), overlaps updated after each flip."""
    B, N = sigma.shape
    P = xi.shape[0]
    out = sigma.copy()
    for r in nb.prange(B):
        M = np.zeros(P)
        for mu in range(P):
            acc = 0.0
            for j in range(N):
                acc += xi[mu, j] * out[r, j]
            M[mu] = acc
        for k in range(N):
            i = order[r, k]
            s = out[r, i]
            shift = 0.0
            if kind == KIND_EXP:
                shift = M[0]
                for mu in range(P):
                    shift = max(shift, M[mu])
                shift += 2.0
            f = 0.0
            for mu in range(P):
                m = M[mu]
                if kind == KIND_POWER:
                    a = _poly(acoef, m)
                    b = _poly(bcoef, m)
                else:
                    ep = np.exp(m + 2.0 - shift)
                    em = np.exp(m - 2.0 - shift)
                    a = 0.5 * (ep - em)
                    b = 0.5 * (2.0 * np.exp(m - shift) - ep - em)
                f += xi[mu, i] * a + s * b
            new = s
            if f > 0.0:
                new = 1.0
            elif f < 0.0:
                new = -1.0
            if new != s:
                out[r, i] = new
                for mu in range(P):
                    M[mu] += 2.0 * new * xi[mu, i]
    return out


class DenseAssociativeMemory:
    """P patterns of N spins with energy -Σ_μ F(ξ^μ·σ).

    Arguments:
        patterns: (P, N) array of ±1.
        n: order of F(x) = x^n (ignored for ``F="exp"``).
        F: ``"power"`` or ``"exp"``.
    """

    def __init__(self, patterns: np.ndarray, n: int = 3, F: str = "power") -> None:
        if F not in ("power", "exp"):
            raise ValueError(f"F={F!r} is not allowed; allowed: 'power', 'exp'")
        if F == "power" and n < 1:
            raise ValueError(f"n={n!r} is not allowed; expected n >= 1")
        self.xi = np.ascontiguousarray(patterns, dtype=np.float64)  # (P, N)
        self.n, self.F = n, F
        self.kind = KIND_POWER if F == "power" else KIND_EXP
        self.acoef, self.bcoef = _ab_coefficients(n) if F == "power" else (np.zeros(1), np.zeros(1))

    @classmethod
    def random(cls, P: int, N: int, n: int = 3, F: str = "power", rng: np.random.Generator | None = None):
        rng = np.random.default_rng() if rng is None else rng
        signs = rng.integers(0, 2, size=(P, N), dtype=np.int8)
        return cls(2.0 * signs - 1.0, n=n, F=F)

    @property
    def P(self) -> int:
        return self.xi.shape[0]

    @property
    def N(self) -> int:
        return self.xi.shape[1]

    def overlaps(self, sigma: np.ndarray) -> np.ndarray:
        """M / N: (B, P) normalised overlaps of states sigma (B, N) with every pattern."""
        return np.atleast_2d(sigma) @ self.xi.T / self.N

    def F_of(self, x: np.ndarray) -> np.ndarray:
        return np.exp(x) if self.F == "exp" else x**self.n

    def energy(self, sigma: np.ndarray) -> np.ndarray:
        """E(σ) = -Σ_μ F(ξ^μ·σ) for states sigma (B, N); returns (B,)."""
        M = np.atleast_2d(sigma) @ self.xi.T
        return -self.F_of(M).sum(axis=1)

    def fields(self, sigma: np.ndarray) -> np.ndarray:
        """Exact local fields f (B, N): σ_i(t+1) = sgn f_i (up to a positive factor per state for ``F="exp"``)."""
        sigma = np.ascontiguousarray(np.atleast_2d(sigma), dtype=np.float64)
        M = sigma @ self.xi.T
        return _fields(self.xi, sigma, M, self.kind, self.acoef, self.bcoef)

    def step(self, sigma: np.ndarray, update: str = "sync", rng: np.random.Generator | None = None) -> np.ndarray:
        """One sweep: all spins at once (``sync``, the paper's setting) or one at a time in random order (``async``).

        Arguments:
            sigma: (B, N) states of ±1.
        Returns:
            (B, N) new states.
        """
        sigma = np.ascontiguousarray(np.atleast_2d(sigma), dtype=np.float64)
        if update == "sync":
            return _sync_step(self.xi, sigma, self.kind, self.acoef, self.bcoef)
        if update == "async":
            rng = np.random.default_rng() if rng is None else rng
            order = np.argsort(rng.random(sigma.shape), axis=1).astype(np.int64)
            return _async_sweep(self.xi, sigma, order, self.kind, self.acoef, self.bcoef)
        raise ValueError(f"update={update!r} is not allowed; allowed: 'sync', 'async'")

    def trajectories(
        self,
        sigma: np.ndarray,
        steps: int,
        *,
        update: str = "sync",
        target: int = 0,
        rng: np.random.Generator | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Run ``steps`` sweeps from states sigma (B, N) and record the overlap with pattern ``target``.

        States that reach a fixed point stop being updated. For synchronous updates the overlaps M are kept up to
        date from the flipped spins alone (O(P) per flip) instead of a fresh product each sweep.

        Returns:
            (m, final): m (B, steps + 1) normalised overlaps with the target; final (B, N) states.
        """
        states = np.array(np.atleast_2d(sigma), dtype=np.float64)
        B = states.shape[0]
        m = np.empty((B, steps + 1))
        m[:, 0] = states @ self.xi[target] / self.N
        active = np.ones(B, dtype=bool)
        M = states @ self.xi.T if update == "sync" else None  # (B, P)
        for t in range(1, steps + 1):
            idx = np.nonzero(active)[0]
            if idx.size:
                old = states[idx]
                if update == "sync":
                    new = _sign_update(old, _fields(self.xi, old, M[idx], self.kind, self.acoef, self.bcoef))
                else:
                    new = self.step(old, update=update, rng=rng)
                changed = new != old
                active[idx[~changed.any(axis=1)]] = False
                if M is not None and changed.sum() > 0.02 * changed.size:  # many flips: one dense product
                    M[idx] = new @ self.xi.T
                elif M is not None:  # few flips: O(P) per flipped spin
                    for k, r in enumerate(idx):
                        cols = np.nonzero(changed[k])[0]
                        if cols.size:
                            M[r] += self.xi[:, cols] @ (new[k, cols] - old[k, cols])
                states[idx] = new
            m[:, t] = states @ self.xi[target] / self.N
        return m, states

    def crosstalk(self, sigma: np.ndarray, target: int = 0, fields: np.ndarray | None = None) -> np.ndarray:
        """Crosstalk noise (B, N) on each spin when retrieving pattern ``target``:

            z_i = ξ_i^target Σ_{μ≠target} ξ_i^μ g(h_μi),

        the part of the aligned field that does not come from the target pattern itself. ``fields``: the states'
        fields if already computed (``self.fields(sigma)``), to save the product over patterns.
        """
        sigma = np.ascontiguousarray(np.atleast_2d(sigma), dtype=np.float64)
        total = (self.fields(sigma) if fields is None else fields) * self.xi[target]
        own = DenseAssociativeMemory(self.xi[target : target + 1], n=self.n, F=self.F)
        if self.F == "exp":  # the exp fields carry a per-state scale: compare in the same units
            raise NotImplementedError("crosstalk is defined for F='power' only")
        return total - own.fields(sigma) * self.xi[target]


def fields_reference(xi: np.ndarray, sigma: np.ndarray, F) -> np.ndarray:
    """Plain numpy O(N²P) implementation of the exact rule's field, Σ_μ [F(ξ_i^μ + h_μi) - F(-ξ_i^μ + h_μi)].

    Arguments:
        xi: (P, N) patterns; sigma: (N,) one state; F: the separation function, vectorised.
    Returns:
        (N,) fields; the test oracle for the Numba kernels.
    """
    P, N = xi.shape
    out = np.empty(N)
    for i in range(N):
        mask = np.arange(N) != i
        h = xi[:, mask] @ sigma[mask]  # (P,) h_μi, spin i left out
        out[i] = np.sum(F(xi[:, i] + h) - F(-xi[:, i] + h))
    return out


def flip_to_overlap(pattern: np.ndarray, m0: float, rng: np.random.Generator) -> np.ndarray:
    """A state with overlap exactly round(N (1 - m0) / 2) flipped bits away from ``pattern`` (N,)."""
    N = pattern.shape[0]
    k = int(round(N * (1.0 - m0) / 2.0))
    state = pattern.copy()
    idx = rng.choice(N, size=k, replace=False)
    state[idx] *= -1
    return state
