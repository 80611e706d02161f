"""VWM behaviour-fitting RNN experiments: per seed, the rate RNN trained by the DDPM loss and by MSE, an untrained
RNN sampled like the DDPM one, and the generator's own surrogate behaviour, all on the same evaluation trials; the
Bays mixture fitted by EM to each set of responses, over all trials, close and far trials, and bins of distance; and
how well the MSE-trained RNN learned what it was trained for (the behaviour's mean: the control's competence)."""

from __future__ import annotations

import time

import numpy as np
import torch
import xarray as xr
from tqdm.auto import tqdm

from lab.core.runtime import threads
from lab.methods.vwm_rnn import model as M
from lab.methods.vwm_rnn.config import Config
from lab.methods.vwm_rnn.train import build, eval_trials, outputs, train_run

__all__ = ["run"]

#: the response sets of a seed: DDPM-trained, MSE-trained, untrained (sampled by reverse diffusion), the generator
MODELS = ("ddpm", "mse", "untrained", "generator")
SUBSETS = ("all", "close", "far")
PARAMS = ("w_t", "w_nt", "w_u", "kappa")
#: bins of location distance for the swap-rate curve
DISTANCE_BINS = 6


def _fit(resp: np.ndarray, target: np.ndarray, nontarget: np.ndarray) -> list[float]:
    if len(resp) < 5:
        return [np.nan] * len(PARAMS)
    m = M.fit_mixture(resp, target, nontarget)
    return [m.w_t, m.w_nt, m.w_u, m.kappa]


def run(cfg: Config, progress: bool = True) -> xr.Dataset:
    """Train, sample and fit.

    Returns:
        Dataset with dims seed, model, trial, subset, param, distance_bin, ddpm_step, mse_step (see each
        variable's long_name); attrs with the generator's settings and the run's CPU time.
    """
    start_cpu = time.process_time()
    trials = eval_trials(cfg)
    target, nontarget = trials.col[:, 0].numpy().astype(float), trials.col[:, 1].numpy().astype(float)
    dist = trials.distance.numpy().astype(float)
    mean = M.behaviour_mean(trials, radius=cfg.radius)  # (n_eval, 2): what the MSE-trained RNN should output
    subsets = {"all": np.ones_like(dist, bool), "close": dist < cfg.close, "far": dist > cfg.far}
    edges = np.linspace(0, np.pi, DISTANCE_BINS + 1)
    S, K = len(cfg.seeds), len(MODELS)
    resp = np.full((S, K, cfg.n_eval), np.nan)
    fits = np.full((S, K, len(SUBSETS), len(PARAMS)), np.nan)
    binned = np.full((S, K, DISTANCE_BINS), np.nan)
    loss_ddpm, loss_mse = np.full((S, cfg.ddpm_steps), np.nan), np.full((S, cfg.mse_steps), np.nan)
    cpu = np.full((S, 2), np.nan)
    skill = np.full(S, np.nan)
    bar = tqdm(total=2 * S, desc="VWM RNN trainings", disable=not progress)
    with threads(cfg.threads):
        for s, seed in enumerate(cfg.seeds):
            nets = {}
            for k, kind in enumerate(("ddpm", "mse")):
                tr = train_run(cfg, kind, seed, progress=progress)
                nets[kind] = tr.model
                (loss_ddpm if kind == "ddpm" else loss_mse)[s] = tr.curves["loss"]
                cpu[s, k] = np.nan if tr.loaded else float(tr.meta.get("cpu_s", np.nan))
                bar.update(1)
            nets["untrained"] = build(cfg, seed).eval()
            for k, name in enumerate(MODELS):
                x = outputs(cfg, nets.get(name), trials, seed, ddpm=name != "mse")  # (n_eval, 2)
                resp[s, k] = torch.atan2(x[:, 1], x[:, 0]).numpy().astype(float)
                if name == "mse":
                    skill[s] = M.mean_skill(x, mean)
                for j, sub in enumerate(SUBSETS):
                    m = subsets[sub]
                    fits[s, k, j] = _fit(resp[s, k, m], target[m], nontarget[m])
                for b in range(DISTANCE_BINS):
                    m = (dist >= edges[b]) & (dist < edges[b + 1])
                    binned[s, k, b] = _fit(resp[s, k, m], target[m], nontarget[m])[1]
    bar.close()
    centres = 0.5 * (edges[1:] + edges[:-1])
    return xr.Dataset(
        {
            "response": (("seed", "model", "trial"), resp,
                         {"long_name": "reported colour (angle of the output at the end of the response period)",
                          "units": "rad"}),
            "mixture": (("seed", "model", "subset", "param"), fits,
                        {"long_name": "Bays mixture fitted by EM: weights of target, non-target and uniform, and "
                                      "the von Mises concentration κ", "units": "1"}),
            "swap_by_distance": (("seed", "model", "distance_bin"), binned,
                                 {"long_name": "non-target weight w_NT of the mixture fitted in each bin of "
                                               "location distance", "units": "1"}),
            "loss_ddpm": (("seed", "ddpm_step"), loss_ddpm,
                          {"long_name": "DDPM ε-prediction loss of the DDPM-trained RNN per step", "units": "1"}),
            "loss_mse": (("seed", "mse_step"), loss_mse,
                         {"long_name": "MSE loss of the MSE-trained RNN per step", "units": "1"}),
            "mse_mean_skill": ("seed", skill,
                               {"long_name": "competence of the MSE-trained RNN: 1 - Σ||x - m||² / Σ||m||² of its "
                                             "output x against the behaviour's mean m = (1 - p) c_T + p c_NT on the "
                                             "evaluation trials (1: m itself, 0: an output of 0)", "units": "1"}),
            "train_cpu_time": (("seed", "kind"), cpu,
                               {"long_name": "CPU time of the training (NaN: loaded from the cache)", "units": "s"}),
            "target": ("trial", target, {"long_name": "the cued item's colour", "units": "rad"}),
            "nontarget": ("trial", nontarget, {"long_name": "the distractor's colour", "units": "rad"}),
            "distance": ("trial", dist, {"long_name": "distance in location between the items", "units": "rad"}),
            "p_swap": ("trial", trials.p_swap.numpy().astype(float),
                       {"long_name": "the generator's swap probability", "units": "1"}),
        },
        coords={
            "seed": ("seed", list(cfg.seeds)),
            "model": ("model", list(MODELS), {"long_name": "RNN trained by the DDPM loss; by MSE; untrained "
                                                          "(sampled like the DDPM one); the generator's draws"}),
            "kind": ("kind", ["ddpm", "mse"]),
            "subset": ("subset", list(SUBSETS), {"long_name": "all trials; close (distance < close); far "
                                                              "(distance > far)"}),
            "param": ("param", list(PARAMS)),
            "distance_bin": ("distance_bin", centres, {"long_name": "centre of the distance bin", "units": "rad"}),
            "trial": ("trial", np.arange(cfg.n_eval)),
            "ddpm_step": ("ddpm_step", np.arange(1, cfg.ddpm_steps + 1)),
            "mse_step": ("mse_step", np.arange(1, cfg.mse_steps + 1)),
        },
        attrs={"swap_max": cfg.swap_max, "swap_width": cfg.swap_width, "close": cfg.close, "far": cfg.far,
               "radius": cfg.radius, "diffusion_steps": cfg.diffusion_steps, "hidden": cfg.hidden,
               "generator_swap_rate": float(trials.p_swap.mean()),
               "cued_colour_mean_skill": M.mean_skill(M.behaviour_mean(trials, torch.zeros(cfg.n_eval), cfg.radius),
                                                      mean),
               "run_cpu_time_s": time.process_time() - start_cpu},
    )
