"""DAM experiments: overlap trajectories over (alpha, m0, trial) with theory alongside; ``run`` builds the Dataset."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import xarray as xr
from tqdm.auto import tqdm

from lab.methods.dam import measures, theory
from lab.methods.dam.config import Config
from lab.methods.dam.model import DenseAssociativeMemory, flip_to_overlap


@dataclass
class _Trajectories:
    """Simulated overlaps for one load: m (m0, trial, step) and crosstalk variances."""

    m: np.ndarray  # (m0, trial, step + 1) overlap with pattern 1
    noise_random: float  # crosstalk variance at random states (m ≈ 0)
    noise_retrieved: float  # crosstalk variance at final states with m >= 1 - eps (NaN if none)


def _simulate(
    *,
    n: int,
    F: str,
    N: int,
    alpha: float,
    m0s,
    trials: int,
    steps: int,
    update: str,
    eps: float,
    rng: np.random.Generator,
) -> _Trajectories:
    """Run ``trials`` trajectories from each initial overlap in ``m0s`` at load ``alpha``, fresh patterns per trial.

    Arguments:
        n, F: separation function; N: spins; alpha: P / N^(n-1); m0s: (M,) initial overlaps; steps: sweeps.
    Returns:
        _Trajectories with m of shape (len(m0s), trials, steps + 1).
    """
    P = max(1, round(alpha * N ** (n - 1)))
    m = np.empty((trials, len(m0s), steps + 1))
    var_random, var_retrieved = [], []
    for trial in range(trials):  # fresh patterns every trial: trials are independent samples of the network
        dam = DenseAssociativeMemory.random(P, N, n=n, F=F, rng=rng)
        target = dam.xi[0]
        states = np.stack([flip_to_overlap(target, m0, rng) for m0 in m0s])  # (M, N)
        m[trial], states = dam.trajectories(states, steps, update=update, rng=rng)
        if F == "power":
            var_random.append(np.var(dam.crosstalk(rng.choice(np.array([-1.0, 1.0]), size=(4, N)))))
            good = m[trial, :, -1] >= 1.0 - eps
            if good.any():
                var_retrieved.append(np.var(dam.crosstalk(states[good])))
    noise_random = float(np.mean(var_random)) if var_random else math.nan
    noise_retrieved = float(np.mean(var_retrieved)) if var_retrieved else math.nan
    return _Trajectories(m.transpose(1, 0, 2), noise_random, noise_retrieved)


def _order_dataset(cfg: Config, n: int, N: int, alphas, suffix: str, rng, progress: bool) -> xr.Dataset:
    m0s = np.asarray(cfg.m0s, dtype=float)
    sims = []
    for alpha in tqdm(alphas, desc=f"DAM n={n}, N={N}", disable=not progress, leave=False):
        sims.append(
            _simulate(n=n, F=cfg.F, N=N, alpha=alpha, m0s=m0s, trials=cfg.trials, steps=cfg.steps,
                     update=cfg.update, eps=cfg.eps, rng=rng)
        )
    m = np.stack([s.m for s in sims])  # (alpha, m0, trial, step)
    has_theory = cfg.F == "power"
    m_th = np.full((len(alphas), len(m0s), cfg.steps + 1), np.nan)
    if has_theory:
        for a, alpha in enumerate(alphas):
            for k, m0 in enumerate(m0s):
                m_th[a, k] = theory.recursion(m0, alpha, n, cfg.steps)
    p_ret = (m[..., -1] >= cfg.retrieved).mean(axis=2)  # (alpha, m0)
    edge = np.array([measures.basin_edge(m0s, p_ret[a]) for a in range(len(alphas))])
    edge_th = np.array([theory.basin_edge(a, n) if has_theory else np.nan for a in alphas])
    if m0s[-1] == 1.0:  # critical load: does a run started at the pattern itself keep it?
        hold = (m[:, -1, :, -1] >= cfg.retrieved_capacity).mean(axis=1)
        crit = measures.critical_load(np.asarray(alphas), hold)
        hold_th = (m_th[:, -1, -1] >= cfg.retrieved_capacity).astype(float)
        crit_th_T = measures.critical_load(np.asarray(alphas), hold_th) if has_theory else np.nan
    else:
        crit = crit_th_T = np.nan
    if n == 2:
        crit_th = theory.ags_capacity()[0]
        crit_src = "AGS zero-temperature capacity"
    else:
        crit_th = theory.critical_load(n) if has_theory else np.nan
        crit_src = "saddle-node of the signal-to-noise recursion"
    s = suffix
    a_dim, load_desc = f"alpha{s}", f"load P / N^{n - 1}"
    dims4 = (a_dim, "m0", "trial", "step")
    ds = xr.Dataset(
        {
            f"m{s}": (dims4, m, {"long_name": f"overlap with pattern 1 (n = {n}, simulated)", "units": "1"}),
            f"m_theory{s}": ((a_dim, "m0", "step"), m_th,
                             {"long_name": f"overlap from the signal-to-noise recursion (n = {n})", "units": "1"}),
            f"t_conv{s}": ((a_dim, "m0", "trial"), measures.first_hit(m, cfg.eps),
                           {"long_name": "steps until m >= 1 - eps (NaN: never)", "units": "sweeps"}),
            f"t_conv_theory{s}": ((a_dim, "m0"), measures.first_hit(m_th, cfg.eps),
                                  {"long_name": "recursion's steps until m >= 1 - eps", "units": "sweeps"}),
            f"p_retrieve{s}": ((a_dim, "m0"), p_ret,
                               {"long_name": "fraction of trials with final overlap >= retrieved", "units": "1"}),
            f"basin_edge{s}": ((a_dim,), edge, {"long_name": "simulated basin edge (m0 at p_retrieve = 1/2)",
                                                "units": "1"}),
            f"basin_edge_theory{s}": ((a_dim,), edge_th,
                                      {"long_name": "unstable fixed point m_u of the recursion", "units": "1"}),
            f"noise_var_random{s}": ((a_dim,), np.array([x.noise_random for x in sims]),
                                     {"long_name": "crosstalk variance at random states (m ~ 0)",
                                      "units": "field^2"}),
            f"noise_var_retrieved{s}": ((a_dim,), np.array([x.noise_retrieved for x in sims]),
                                        {"long_name": "crosstalk variance at retrieved states (m ~ 1)",
                                         "units": "field^2"}),
            f"critical_load{s}": ((), crit, {"long_name": "simulated critical load (half the runs from the pattern "
                                             "end with m >= retrieved_capacity)", "units": "1"}),
            f"critical_load_theory{s}": ((), crit_th, {"long_name": crit_src, "units": "1"}),
            f"critical_load_theory_T{s}": ((), crit_th_T, {"long_name": "recursion's critical load after `steps`",
                                                          "units": "1"}),
        },
        coords={a_dim: (a_dim, np.asarray(alphas, float), {"long_name": load_desc, "units": "1"})},
        attrs={f"order{s}": n, f"N{s}": N},
    )
    return ds


def _capacity_scaling(cfg: Config, rng, progress: bool) -> xr.Dataset:
    """n = 2 critical load at each size in ``N_n2`` (from the pattern itself) and its large-N extrapolation."""
    alphas = np.asarray(cfg.alphas_n2, dtype=float)
    sizes = np.asarray(cfg.N_n2, dtype=int)
    crit = np.empty(len(sizes))
    for k, N in enumerate(tqdm(sizes, desc="DAM n=2 capacity vs N", disable=not progress, leave=False)):
        p = [
            np.mean(_simulate(n=2, F=cfg.F, N=int(N), alpha=a, m0s=[1.0], trials=cfg.trials,
                             steps=cfg.capacity_steps, update=cfg.update, eps=cfg.eps, rng=rng).m[0, :, -1]
                    >= cfg.retrieved_capacity)
            for a in alphas
        ]
        crit[k] = measures.critical_load(alphas, np.asarray(p))
    if len(sizes) >= 2:  # least squares alpha_c(N) = a + c / sqrt(N)
        X = np.stack([np.ones(len(sizes)), 1.0 / np.sqrt(sizes)], axis=1)
        (a_inf, slope), *_ = np.linalg.lstsq(X, crit, rcond=None)
    else:
        a_inf, slope = math.nan, math.nan
    return xr.Dataset(
        {
            "critical_load_by_N_n2": (("N_n2",), crit, {"long_name": "n = 2 critical load at each size",
                                                        "units": "1"}),
            "critical_load_extrapolated_n2": ((), a_inf, {"long_name": "n = 2 critical load extrapolated to "
                                                          "N -> inf (fit a + c / sqrt(N))", "units": "1"}),
            "critical_load_slope_n2": ((), slope, {"long_name": "finite-size coefficient c", "units": "1"}),
        },
        coords={"N_n2": ("N_n2", sizes, {"long_name": "spins of the n = 2 reference network"})},
    )


def _self_noise_run(dam, m0s, cfg: Config, rng) -> tuple[np.ndarray, np.ndarray]:
    """Trajectories from each m0 with the crosstalk recorded for the first ``lags`` sweeps.

    Returns:
        m (M, steps + 1) overlaps and c (M, lags + 1): C(0, s) = corr_i(xi_i sigma_i(0), z_i(s)), the correlation of
        each start's aligned state with the crosstalk z(s) on the same spins s sweeps later (NaN: no F = x^n).
    """
    target = dam.xi[0]
    states = np.stack([flip_to_overlap(target, m0, rng) for m0 in m0s])  # (M, N)
    start = states * target
    c = np.full((len(m0s), cfg.lags + 1), np.nan)
    m = np.empty((len(m0s), cfg.steps + 1))
    for s in range(cfg.lags + 1):
        m[:, s] = states @ target / dam.N
        f = dam.fields(states) if cfg.F == "power" or cfg.update == "sync" else None  # (M, N)
        if cfg.F == "power":
            c[:, s] = measures.row_correlation(start, dam.crosstalk(states, fields=f))
        if s < cfg.lags and cfg.update == "sync":  # the sync rule on the fields just computed: sgn f, 0 keeps
            states = np.where(f > 0, 1.0, np.where(f < 0, -1.0, states))
        elif s < cfg.lags:
            states = dam.step(states, update=cfg.update, rng=rng)
    if cfg.steps > cfg.lags:
        m[:, cfg.lags:], _ = dam.trajectories(states, cfg.steps - cfg.lags, update=cfg.update, rng=rng)
    return m, c


def _compare_orders(cfg: Config, rng, progress: bool) -> xr.Dataset:
    """Order n and the n = 2 control at the same loads relative to each one's critical load, same m0s and steps."""
    orders = (cfg.n, 2)
    loads, m0s = np.asarray(cfg.loads, float), np.asarray(cfg.m0s, float)
    crit = np.array([theory.ags_capacity()[0] if k == 2 else theory.critical_load(k) for k in orders])
    alphas = crit[:, None] * loads[None, :]  # (order, load)
    shape = (len(orders), len(loads), len(m0s))
    m = np.empty((*shape, cfg.trials, cfg.steps + 1))
    c = np.empty((*shape, cfg.trials, cfg.lags + 1))
    m_th = np.full((*shape, cfg.steps + 1), np.nan)
    for o, k in enumerate(orders):
        for r in tqdm(range(len(loads)), desc=f"DAM n={k} vs relative load", disable=not progress, leave=False):
            P = max(1, round(alphas[o, r] * cfg.N ** (k - 1)))
            for trial in range(cfg.trials):  # fresh patterns every trial, as in the load grids
                dam = DenseAssociativeMemory.random(P, cfg.N, n=k, F=cfg.F, rng=rng)
                m[o, r, :, trial], c[o, r, :, trial] = _self_noise_run(dam, m0s, cfg, rng)
            if cfg.F == "power":
                m_th[o, r] = [theory.recursion(x, alphas[o, r], k, cfg.steps) for x in m0s]
    edge = np.array([theory.basin_edge(a, cfg.n) if cfg.F == "power" else np.nan for a in alphas[0]])
    dims = ("order", "load", "m0")
    return xr.Dataset(
        {
            "m_cmp": ((*dims, "trial", "step"), m, {"long_name": "overlap with pattern 1 (simulated)", "units": "1"}),
            "m_theory_cmp": ((*dims, "step"), m_th, {"long_name": "overlap from the signal-to-noise recursion",
                                                      "units": "1"}),
            "t_conv_cmp": ((*dims, "trial"), measures.first_hit(m, cfg.eps),
                           {"long_name": "steps until m >= 1 - eps (NaN: never)", "units": "sweeps"}),
            "t_conv_theory_cmp": (dims, measures.first_hit(m_th, cfg.eps),
                                  {"long_name": "recursion's steps until m >= 1 - eps (NaN: never)",
                                   "units": "sweeps"}),
            "self_corr_cmp": ((*dims, "trial", "lag"), c,
                              {"long_name": "C(0, s): correlation over spins of xi sigma(0) with the crosstalk "
                                            "z(s) s sweeps later", "units": "1"}),
            "alpha_cmp": (("order", "load"), alphas, {"long_name": "absolute load P / N^(order-1)", "units": "1"}),
            "critical_load_ref_cmp": (("order",), crit,
                                      {"long_name": "critical load the relative loads refer to (order n: the "
                                                    "recursion's saddle-node; n = 2: AGS)", "units": "1"}),
            "basin_edge_theory_cmp": (("load",), edge,
                                      {"long_name": "order n's recursion basin edge m_u at each relative load",
                                       "units": "1"}),
        },
        coords={
            "order": ("order", np.asarray(orders), {"long_name": "order n of F(x) = x^n", "units": "1"}),
            "load": ("load", loads, {"long_name": "load relative to the order's critical load", "units": "1"}),
            "lag": ("lag", np.arange(cfg.lags + 1), {"long_name": "sweeps s after the start", "units": "sweeps"}),
        },
    )


def run(cfg: Config, progress: bool = True) -> xr.Dataset:
    """Simulate order n (and the n = 2 reference) over the grids of ``cfg``; theory alongside.

    Returns:
        Dataset with dims alpha, alpha_n2, m0, trial, step, and order, load, lag for the side-by-side comparison of
        order n with the n = 2 control (``*_cmp``; see each variable's long_name).
    """
    rng = np.random.default_rng(cfg.seed)
    parts = [_order_dataset(cfg, cfg.n, cfg.N, cfg.alphas, "", rng, progress)]
    if cfg.N_n2:
        parts.append(_order_dataset(cfg, 2, max(cfg.N_n2), cfg.alphas_n2, "_n2", rng, progress))
        parts.append(_capacity_scaling(cfg, rng, progress))
    parts.append(_compare_orders(cfg, rng, progress))  # last: the grids above keep their random streams
    ds = xr.merge(parts, combine_attrs="no_conflicts")
    ds = ds.assign_coords(
        m0=("m0", np.asarray(cfg.m0s, float), {"long_name": "initial overlap", "units": "1"}),
        trial=("trial", np.arange(cfg.trials)),
        step=("step", np.arange(cfg.steps + 1), {"long_name": "update sweep", "units": "sweeps"}),
    )
    ds.attrs.update(n=cfg.n, N=cfg.N, F=cfg.F, update=cfg.update, eps=cfg.eps, retrieved=cfg.retrieved)
    return ds
