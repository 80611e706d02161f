"""What the ``hopfield`` dashboard (and a notebook) calls besides ``run``: a small experiment at one load (memo)."""

from __future__ import annotations

import numpy as np
import xarray as xr

from lab.cache import memo
from lab.methods.dam import measures, theory
from lab.methods.dam.config import Config
from lab.methods.dam.model import DenseAssociativeMemory, flip_to_overlap


@memo(maxsize=64)
def explore(
    *, n: int = 3, N: int = 400, alpha: float = 0.04, m0: float = 0.6, trials: int = 4, steps: int = 12,
    update: str = "sync", eps: float = 0.02, retrieved: float = 0.5, m0_grid: int = 5, seed: int = 0,
) -> xr.Dataset:
    """A small interactive experiment at one load: trajectories from ``m0`` and from a coarse grid of m0.

    Unlike ``run``, all trials share one network (one matrix product per sweep for every state), which keeps an
    answer near a second for P * N up to ~4e7.

    Used by the ``hopfield`` dashboard; validated like a Config (bad values raise ValueError naming the field);
    results are kept in memory (``explore.cached(...)`` says whether an answer is ready).

    Returns:
        Dataset with m (m0, trial, step), m_theory (m0, step), t_conv (m0, trial), t_conv_theory (m0),
        p_retrieve (m0), and attrs basin_edge (simulated), basin_edge_theory and target (the convergence
        target m_s(alpha) - eps, m_s the recursion's retrieval fixed point).
    """
    cfg = Config(n=n, N=N, alphas=(alpha,), N_n2=(), m0s=(m0,), trials=trials, steps=steps, update=update,
                 eps=eps, retrieved=retrieved, seed=seed, lags=1)  # validates the arguments; lags unused here
    rng = np.random.default_rng(seed)
    grid = np.unique(np.round(np.concatenate([np.linspace(0.1, 1.0, m0_grid), [m0]]), 4))
    # one network for every trial and m0, so that each sweep is a single matrix product (interactive speed)
    dam = DenseAssociativeMemory.random(cfg.patterns(alpha), N, n=n, rng=rng)
    states = np.stack([flip_to_overlap(dam.xi[0], x, rng) for x in grid for _ in range(trials)])
    m, _ = dam.trajectories(states, steps, update=update, rng=rng)
    m = m.reshape(len(grid), trials, steps + 1)
    m_th = np.stack([theory.recursion(x, alpha, n, steps) for x in grid])
    p = (m[..., -1] >= retrieved).mean(axis=1)
    target = theory.retrieval_overlap(alpha, n) - eps  # NaN above the recursion's critical load: never converges
    ds = xr.Dataset(
        {
            "m": (("m0", "trial", "step"), m, {"long_name": "overlap (simulated)", "units": "1"}),
            "m_theory": (("m0", "step"), m_th, {"long_name": "overlap (recursion)", "units": "1"}),
            "t_conv": (("m0", "trial"), measures.first_hit(m, target),
                       {"long_name": "steps until m >= m_s(alpha) - eps (NaN: never)", "units": "sweeps"}),
            "t_conv_theory": (("m0",), measures.first_hit(m_th, target),
                              {"long_name": "recursion's steps until m >= m_s(alpha) - eps", "units": "sweeps"}),
            "p_retrieve": (("m0",), p, {"long_name": "fraction of trials that retrieve", "units": "1"}),
        },
        coords={"m0": grid, "trial": np.arange(trials), "step": np.arange(steps + 1)},
        attrs=dict(n=n, N=N, alpha=alpha, chosen_m0=m0, P=cfg.patterns(alpha), update=update, target=target,
                   basin_edge=measures.basin_edge(grid, p), basin_edge_theory=theory.basin_edge(alpha, n)),
    )
    return ds
