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
from lab.results import Coord, Schema, Var

_NO_THEORY = "NaN when F is not the power law x^n: no signal-to-noise recursion"

#: the coordinates of the trajectories' starts, trials and sweeps (every part)
GRID = {"m0": Coord("initial overlap", "1"), "trial": Coord(), "step": Coord("update sweep", "sweeps")}


def order_schema(n: int, s: str) -> Schema:
    """One order's load grid: order n (suffix ``s`` = "") or the n = 2 reference network ("_n2")."""
    a = f"alpha{s}"
    return Schema(
        Var(f"m{s}", (a, "m0", "trial", "step"), f"overlap with pattern 1 (n = {n}, simulated)"),
        Var(f"m_theory{s}", (a, "m0", "step"), f"overlap from the signal-to-noise recursion (n = {n})",
            missing=_NO_THEORY),
        Var(f"target{s}", (a,), "convergence target: the recursion's retrieval fixed point m_s(alpha) - eps (NaN: "
            "none at this load; 1 - eps without a recursion)"),
        Var(f"t_conv{s}", (a, "m0", "trial"), "steps until m >= target (NaN: never within the run)", "sweeps"),
        Var(f"t_conv_theory{s}", (a, "m0"), "recursion's steps until m >= target (NaN: never)", "sweeps"),
        Var(f"p_retrieve{s}", (a, "m0"), "fraction of trials with final overlap >= retrieved"),
        Var(f"basin_edge{s}", (a,), "simulated basin edge (m0 at p_retrieve = 1/2)"),
        Var(f"basin_edge_theory{s}", (a,), "unstable fixed point m_u of the recursion"),
        Var(f"noise_var_random{s}", (a,), "crosstalk variance at random states (m ~ 0)", "field^2"),
        Var(f"noise_var_retrieved{s}", (a,), "crosstalk variance at retrieved states (m ~ 1)", "field^2"),
        Var(f"critical_load{s}", (), "simulated critical load (half the runs from the pattern end with m >= "
            "retrieved_capacity)"),
        Var(f"critical_load_theory{s}", (), "AGS zero-temperature capacity" if n == 2 else
            "saddle-node of the signal-to-noise recursion"),
        Var(f"critical_load_theory_T{s}", (), "recursion's critical load after `steps`"),
        coords={a: Coord(f"load P / N^{n - 1}", "1"), **GRID},
    )


#: the n = 2 reference network's capacity against its size
CAPACITY = Schema(
    Var("critical_load_by_N_n2", ("N_n2",), "n = 2 critical load at each size"),
    Var("critical_load_extrapolated_n2", (), "n = 2 critical load extrapolated to N -> inf (fit a + c / sqrt(N))"),
    Var("critical_load_slope_n2", (), "finite-size coefficient c"),
    coords={"N_n2": Coord("spins of the n = 2 reference network")},
)

#: order n beside the n = 2 control at the same loads relative to each one's critical load
COMPARE = Schema(
    Var("m_cmp", ("order", "load", "m0", "trial", "step"), "overlap with pattern 1 (simulated)"),
    Var("m_theory_cmp", ("order", "load", "m0", "step"), "overlap from the signal-to-noise recursion",
        missing=_NO_THEORY),
    Var("one_step_error_cmp", ("order", "load", "m0", "trial", "step"), "one-step-ahead error m(t+1) - f_n(m(t)) "
        "of the recursion applied to the simulated overlap (NaN at the last step, or without a recursion)"),
    Var("target_cmp", ("order", "load"), "convergence target: the recursion's retrieval fixed point m_s(alpha) - eps "
        "(1 - eps without a recursion)"),
    Var("t_conv_cmp", ("order", "load", "m0", "trial"), "steps until m >= target_cmp (NaN: never within the run, "
        "censored)", "sweeps"),
    Var("never_cmp", ("order", "load", "m0"), "trials that never reached target_cmp within the run (censored)",
        "trials", dtype=int),
    Var("t_conv_theory_cmp", ("order", "load", "m0"), "recursion's steps until m >= target_cmp (NaN: never)",
        "sweeps"),
    Var("self_corr_cmp", ("order", "load", "m0", "trial", "lag"), "C(0, s): correlation over spins of xi sigma(0) "
        "with the crosstalk z(s) s sweeps later"),
    Var("alpha_cmp", ("order", "load"), "absolute load P / N^(order-1)"),
    Var("critical_load_ref_cmp", ("order",), "critical load the relative loads refer to (order n: the recursion's "
        "saddle-node; n = 2: AGS)"),
    Var("basin_edge_theory_cmp", ("order", "load"), "each order's recursion basin edge: the smallest start it "
        "retrieves from (n >= 3: m_u; n = 2: 0, m = 0 being unstable)"),
    coords={"order": Coord("order n of F(x) = x^n", "1"), "load": Coord("load relative to the order's critical load",
                                                                        "1"),
            "lag": Coord("sweeps s after the start", "sweeps"), **GRID},
)


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
    """Order n at N spins over the loads ``alphas``: trajectories, retrieval, basin edge and critical load, the
    recursion alongside (variables suffixed by ``suffix``)."""
    s, m0s, alphas = suffix, np.asarray(cfg.m0s, dtype=float), np.asarray(alphas, float)
    res = order_schema(n, s).new(**{f"alpha{s}": alphas}, m0=m0s, trial=np.arange(cfg.trials),
                                 step=np.arange(cfg.steps + 1))
    has_theory = cfg.F == "power"
    for a, alpha in enumerate(tqdm(alphas, desc=f"DAM n={n}, N={N}", disable=not progress, leave=False)):
        sim = _simulate(n=n, F=cfg.F, N=N, alpha=alpha, m0s=m0s, trials=cfg.trials, steps=cfg.steps,
                        update=cfg.update, eps=cfg.eps, rng=rng)
        res[f"m{s}"][a] = sim.m
        res[f"noise_var_random{s}"][a] = sim.noise_random
        res[f"noise_var_retrieved{s}"][a] = sim.noise_retrieved
        if has_theory:
            for k, m0 in enumerate(m0s):
                res[f"m_theory{s}"][a, k] = theory.recursion(m0, alpha, n, cfg.steps)
    m, m_th = res[f"m{s}"][...], res[f"m_theory{s}"][...]  # (alpha, m0, trial, step), (alpha, m0, step)
    p_ret = (m[..., -1] >= cfg.retrieved).mean(axis=2)  # (alpha, m0)
    res[f"p_retrieve{s}"] = p_ret
    target = np.array([theory.retrieval_overlap(a, n) - cfg.eps if has_theory else 1.0 - cfg.eps for a in alphas])
    res[f"target{s}"] = target
    res[f"t_conv{s}"] = measures.first_hit(m, target[:, None, None])
    res[f"t_conv_theory{s}"] = measures.first_hit(m_th, target[:, None])
    res[f"basin_edge{s}"] = [measures.basin_edge(m0s, p_ret[a]) for a in range(len(alphas))]
    res[f"basin_edge_theory{s}"] = [theory.basin_edge(a, n) if has_theory else np.nan for a in alphas]
    if m0s[-1] == 1.0:  # critical load: does a run started at the pattern itself keep it?
        hold = (m[:, -1, :, -1] >= cfg.retrieved_capacity).mean(axis=1)
        res[f"critical_load{s}"] = measures.critical_load(alphas, hold)
        hold_th = (m_th[:, -1, -1] >= cfg.retrieved_capacity).astype(float)
        res[f"critical_load_theory_T{s}"] = measures.critical_load(alphas, hold_th) if has_theory else np.nan
    else:
        res[f"critical_load{s}"] = res[f"critical_load_theory_T{s}"] = np.nan
    if n == 2:
        res[f"critical_load_theory{s}"] = theory.ags_capacity()[0]
    else:
        res[f"critical_load_theory{s}"] = theory.critical_load(n) if has_theory else np.nan
    return res.build(attrs={f"order{s}": n, f"N{s}": N})


def _capacity_scaling(cfg: Config, rng, progress: bool) -> xr.Dataset:
    """n = 2 critical load at each size in ``N_n2`` (from the pattern itself) and its large-N extrapolation."""
    alphas = np.asarray(cfg.alphas_n2, dtype=float)
    sizes = np.asarray(cfg.N_n2, dtype=int)
    res = CAPACITY.new(N_n2=sizes)
    for k, N in enumerate(tqdm(sizes, desc="DAM n=2 capacity vs N", disable=not progress, leave=False)):
        p = [
            np.mean(_simulate(n=2, F=cfg.F, N=int(N), alpha=a, m0s=[1.0], trials=cfg.trials,
                              steps=cfg.capacity_steps, update=cfg.update, eps=cfg.eps, rng=rng).m[0, :, -1]
                    >= cfg.retrieved_capacity)
            for a in alphas
        ]
        res["critical_load_by_N_n2"][k] = measures.critical_load(alphas, np.asarray(p))
    if len(sizes) >= 2:  # least squares alpha_c(N) = a + c / sqrt(N)
        X = np.stack([np.ones(len(sizes)), 1.0 / np.sqrt(sizes)], axis=1)
        (a_inf, slope), *_ = np.linalg.lstsq(X, res["critical_load_by_N_n2"][...], rcond=None)
    else:
        a_inf, slope = math.nan, math.nan
    res["critical_load_extrapolated_n2"] = a_inf
    res["critical_load_slope_n2"] = slope
    return res.build()


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
    res = COMPARE.new(order=np.asarray(orders), load=loads, m0=m0s, trial=np.arange(cfg.trials),
                      step=np.arange(cfg.steps + 1), lag=np.arange(cfg.lags + 1))
    crit = np.array([theory.ags_capacity()[0] if k == 2 else theory.critical_load(k) for k in orders])
    alphas = crit[:, None] * loads[None, :]  # (order, load)
    res["critical_load_ref_cmp"] = crit
    res["alpha_cmp"] = alphas
    for o, k in enumerate(orders):
        for r in tqdm(range(len(loads)), desc=f"DAM n={k} vs relative load", disable=not progress, leave=False):
            P = max(1, round(alphas[o, r] * cfg.N ** (k - 1)))
            for trial in range(cfg.trials):  # fresh patterns every trial, as in the load grids
                dam = DenseAssociativeMemory.random(P, cfg.N, n=k, F=cfg.F, rng=rng)
                res["m_cmp"][o, r, :, trial], res["self_corr_cmp"][o, r, :, trial] = _self_noise_run(dam, m0s, cfg,
                                                                                                     rng)
            if cfg.F == "power":
                res["m_theory_cmp"][o, r] = [theory.recursion(x, alphas[o, r], k, cfg.steps) for x in m0s]
    power = cfg.F == "power"
    m = res["m_cmp"][...]  # (order, load, m0, trial, step)
    error = np.full(m.shape, np.nan)
    if power:  # e(t) = m(t+1) - f_n(m(t)): the recursion one step ahead of each simulated overlap
        for o, k in enumerate(orders):
            for r in range(len(loads)):
                error[o, r, ..., :-1] = m[o, r, ..., 1:] - theory.recursion_step(m[o, r, ..., :-1], alphas[o, r], k)
    res["one_step_error_cmp"] = error
    target = np.array([[theory.retrieval_overlap(a, k) - cfg.eps if power else 1.0 - cfg.eps for a in alphas[o]]
                       for o, k in enumerate(orders)])  # (order, load)
    res["target_cmp"] = target
    res["t_conv_cmp"] = t_conv = measures.first_hit(m, target[:, :, None, None])
    res["never_cmp"] = np.isnan(t_conv).sum(axis=-1)
    res["t_conv_theory_cmp"] = measures.first_hit(res["m_theory_cmp"][...], target[:, :, None])
    res["basin_edge_theory_cmp"] = [[theory.retrieval_edge(a, k) if power else np.nan for a in alphas[o]]
                                    for o, k in enumerate(orders)]
    return res.build()


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
    ds.attrs.update(n=cfg.n, N=cfg.N, F=cfg.F, update=cfg.update, eps=cfg.eps, retrieved=cfg.retrieved)
    return ds
