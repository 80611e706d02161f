"""VWM behaviour-fitting RNN experiments: per seed, the rate RNN trained by the DDPM loss and by MSE, an untrained
RNN sampled like the DDPM one, and the generator's own surrogate behaviour, all on the same evaluation trials; the
Bays mixture fitted by EM to each set of responses, over all trials, close and far trials, and bins of distance; and
how well the MSE-trained RNN learned what it was trained for (the behaviour's mean: the control's competence)."""

from __future__ import annotations

import os

import numpy as np
import torch
import xarray as xr
from tqdm.auto import tqdm

from lab.core.runtime import threads
from lab.methods.vwm_rnn import model as M
from lab.methods.vwm_rnn.config import Config
from lab.methods.vwm_rnn.train import build, eval_trials, outputs, train_all, train_run
from lab.results import Coord, Results, Schema, Var

__all__ = ["run"]

#: the response sets of a seed: DDPM-trained, MSE-trained, untrained (sampled by reverse diffusion), the generator
MODELS = ("ddpm", "mse", "untrained", "generator")
SUBSETS = ("all", "close", "far")
PARAMS = ("w_t", "w_nt", "w_u", "kappa")
#: bins of location distance for the swap-rate curve
DISTANCE_BINS = 6

SCHEMA = Schema(
    Var("response", ("seed", "model", "trial"), "reported colour (angle of the output at the end of the response "
        "period)", "rad"),
    Var("mixture", ("seed", "model", "subset", "param"), "Bays mixture fitted by EM: weights of target, non-target "
        "and uniform, and the von Mises concentration κ"),
    Var("swap_by_distance", ("seed", "model", "distance_bin"), "non-target weight w_NT of the mixture fitted in "
        "each bin of location distance"),
    Var("loss_ddpm", ("seed", "ddpm_step"), "DDPM ε-prediction loss of the DDPM-trained RNN per step"),
    Var("loss_mse", ("seed", "mse_step"), "MSE loss of the MSE-trained RNN per step"),
    Var("mse_mean_skill", ("seed",), "competence of the MSE-trained RNN: 1 - Σ||x - m||² / Σ||m||² of its output x "
        "against the behaviour's mean m = (1 - p) c_T + p c_NT on the evaluation trials (1: m itself, 0: an output "
        "of 0)"),
    Var("train_cpu_time", ("seed", "kind"), "CPU time of the training (NaN: loaded from the cache)", "s"),
    Var("target", ("trial",), "the cued item's colour", "rad"),
    Var("nontarget", ("trial",), "the distractor's colour", "rad"),
    Var("distance", ("trial",), "distance in location between the items", "rad"),
    Var("p_swap", ("trial",), "the generator's swap probability"),
    coords={
        "model": "RNN trained by the DDPM loss; by MSE; untrained (sampled like the DDPM one); the generator's draws",
        "subset": "all trials; close (distance < close); far (distance > far)",
        "distance_bin": Coord("centre of the distance bin", "rad"),
    },
)


def _fit(resp: np.ndarray, target: np.ndarray, nontarget: np.ndarray) -> list[float]:
    if len(resp) < 5:
        return [np.nan] * len(PARAMS)
    m = M.fit_mixture(resp, target, nontarget)
    return [m.w_t, m.w_nt, m.w_u, m.kappa]


def _cpu_s() -> float:
    """CPU seconds of this process and of its finished children (the training workers)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _train(cfg: Config, res: Results, s: int, seed: int, ran: dict) -> dict:
    """The DDPM- and MSE-trained RNNs of one seed (their loss curves and, where trained in this run, CPU times into
    ``res``), and an untrained one. ``ran``: :func:`train_all`'s metas of the trainings that ran in worker
    processes (the networks then load from the cache)."""
    nets = {}
    for k, kind in enumerate(("ddpm", "mse")):
        tr = train_run(cfg, kind, seed)
        nets[kind] = tr.model
        res[f"loss_{kind}"][s] = tr.curves["loss"]
        meta = ran.get((kind, seed), None if tr.loaded else tr.meta)
        res["train_cpu_time"][s, k] = np.nan if meta is None else float(meta.get("cpu_s", np.nan))
    nets["untrained"] = build(cfg, seed).eval()
    return nets


def _fits(res: Results, s: int, k: int, trials: dict[str, np.ndarray], subsets: dict[str, np.ndarray],
          edges: np.ndarray) -> None:
    """The mixture fitted to one set of responses: on each subset of trials and in each bin of distance."""
    r, target, nontarget, dist = res["response"][s, k], trials["target"], trials["nontarget"], trials["distance"]
    for j, sub in enumerate(SUBSETS):
        m = subsets[sub]
        res["mixture"][s, k, j] = _fit(r[m], target[m], nontarget[m])
    for b in range(DISTANCE_BINS):
        m = (dist >= edges[b]) & (dist < edges[b + 1])
        res["swap_by_distance"][s, k, b] = _fit(r[m], target[m], nontarget[m])[1]


def run(cfg: Config, progress: bool = True) -> xr.Dataset:
    """Train, sample and fit.

    Returns:
        Dataset with dims seed, model, trial, subset, param, distance_bin, ddpm_step, mse_step (see each
        variable's long_name); attrs with the generator's settings and the run's CPU time.
    """
    start_cpu = _cpu_s()
    trials = eval_trials(cfg)
    edges = np.linspace(0, np.pi, DISTANCE_BINS + 1)
    res = SCHEMA.new(seed=list(cfg.seeds), model=list(MODELS), kind=["ddpm", "mse"], subset=list(SUBSETS),
                     param=list(PARAMS), distance_bin=0.5 * (edges[1:] + edges[:-1]), trial=np.arange(cfg.n_eval),
                     ddpm_step=np.arange(1, cfg.ddpm_steps + 1), mse_step=np.arange(1, cfg.mse_steps + 1))
    res["target"] = trials.col[:, 0].numpy().astype(float)
    res["nontarget"] = trials.col[:, 1].numpy().astype(float)
    res["distance"] = trials.distance.numpy().astype(float)
    res["p_swap"] = trials.p_swap.numpy().astype(float)
    dist = res["distance"].data
    per_trial = {v: res[v].data for v in ("target", "nontarget", "distance")}
    mean = M.behaviour_mean(trials, radius=cfg.radius)  # (n_eval, 2): what the MSE-trained RNN should output
    subsets = {"all": np.ones_like(dist, bool), "close": dist < cfg.close, "far": dist > cfg.far}
    ran = train_all(cfg, progress=progress)
    bar = tqdm(total=len(cfg.seeds), desc="VWM RNN samples and fits", disable=not progress)
    with threads(cfg.threads):
        for s, seed in enumerate(cfg.seeds):
            nets = _train(cfg, res, s, seed, ran)
            for k, name in enumerate(MODELS):
                x = outputs(cfg, nets.get(name), trials, seed, ddpm=name != "mse")  # (n_eval, 2)
                res["response"][s, k] = torch.atan2(x[:, 1], x[:, 0]).numpy().astype(float)
                if name == "mse":
                    res["mse_mean_skill"][s] = M.mean_skill(x, mean)
                _fits(res, s, k, per_trial, subsets, edges)
            bar.update(1)
    bar.close()
    return res.build(attrs={
        "swap_max": cfg.swap_max, "swap_width": cfg.swap_width, "close": cfg.close, "far": cfg.far,
        "radius": cfg.radius, "diffusion_steps": cfg.diffusion_steps, "hidden": cfg.hidden,
        "generator_swap_rate": float(trials.p_swap.mean()),
        "cued_colour_mean_skill": M.mean_skill(M.behaviour_mean(trials, torch.zeros(cfg.n_eval), cfg.radius), mean),
        "run_cpu_time_s": _cpu_s() - start_cpu})
