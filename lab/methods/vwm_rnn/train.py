"""Training of the rate RNN by the DDPM loss or by MSE on :func:`lab.core.train.fit`, cached by
:func:`lab.cache.cached_model`; and the trained networks' responses on evaluation trials.

Every optimiser step draws fresh trials and fresh target draws from the swap-model generator (a sampler), seeded
by the run's seed, so a run is a function of its config and seed alone.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from lab.cache import cached_model, state_path
from lab.methods.vwm_rnn import model as M
from lab.methods.vwm_rnn.config import Config

__all__ = ["FORMAT", "KINDS", "build", "eval_trials", "n_inputs", "outputs", "respond", "schedule", "timing",
           "train_all", "train_run"]

#: bump when training or the model changes (invalidates cached weights)
FORMAT = 1
#: how a network is trained
KINDS = ("ddpm", "mse")
#: the evaluation trials' generator stream (shared by every seed and model)
EVAL_STREAM = 7_777
#: CPU seconds of one optimiser step per time step of the trial (one thread, quick's sizes: about 25 ms a step of a
#: 25-step trial, Python-bound): the trainings' estimated cost, which orders them and decides whether to pool them
STEP_S_PER_TIME_STEP = 1e-3
#: below this many estimated CPU seconds in all (ci) the trainings run here, without worker processes
SERIAL_BELOW_S = 20.0


def timing(cfg: Config) -> M.Timing:
    return M.Timing(cfg.stimulus, cfg.delay1, cfg.cue, cfg.delay2, cfg.diffusion_steps)


def schedule(cfg: Config) -> M.Schedule:
    return M.Schedule(cfg.diffusion_steps, cfg.beta_first, cfg.beta_last)


def n_inputs(cfg: Config) -> int:
    return 3 * cfg.n_locations + 2


def build(cfg: Config, seed: int) -> M.RateRNN:
    """A freshly initialised network (weights and the fixed readout from ``seed``)."""
    return M.RateRNN(cfg.hidden, n_inputs(cfg), cfg.leak, cfg.noise, seed, act=cfg.activation)


def _key(cfg: Config, kind: str, seed: int) -> dict:
    fields = ("swap_max", "swap_width", "radius", "target_sd", "n_locations", "tuning", "stimulus", "delay1", "cue",
              "delay2", "diffusion_steps", "beta_first", "beta_last", "hidden", "leak", "activation", "noise",
              "batch_size", "lr")
    steps = cfg.ddpm_steps if kind == "ddpm" else cfg.mse_steps
    return {"format": FORMAT, "kind": kind, "seed": seed, "steps": steps, **{f: getattr(cfg, f) for f in fields}}


def train_run(cfg: Config, kind: str, seed: int, *, progress: bool = False):
    """Train the network of ``kind`` (``ddpm`` or ``mse``) from ``seed``, or load it.

    Returns:
        :class:`lab.cache.Trained` (``curves["loss"]`` per step; ``meta["cpu_s"]``, ``meta["wall_s"]``).
    """
    tim, sched = timing(cfg), schedule(cfg)
    start = tim.before_response

    def sampler(step: int):
        g = torch.Generator().manual_seed(int(seed) * 1_000_003 + step)
        trials = M.sample_trials(cfg.batch_size, g, cfg.swap_max, cfg.swap_width)
        return (M.inputs(trials, tim, cfg.n_locations, cfg.tuning),
                M.behaviour(trials, cfg.radius, cfg.target_sd, g))

    def loss(model, batch):
        s, x0 = batch
        if kind == "ddpm":
            return model.ddpm_loss(s, x0, sched, start)
        return model.mse_loss(s, x0, start)

    def train(model):
        from lab.core.train import fit

        torch.manual_seed(seed)  # the loss's own draws (forward chains, private noise)
        t0 = time.process_time()
        res = fit(model, sampler, loss=loss, steps=cfg.ddpm_steps if kind == "ddpm" else cfg.mse_steps,
                  lr=cfg.lr, seed=seed, progress=progress, desc=f"{kind} (seed {seed})", device=cfg.device)
        return {"curves": {"loss": res.loss}, "meta": {"cpu_s": time.process_time() - t0, "wall_s": res.wall_time_s}}

    return cached_model("vwm_rnn", kind, _key(cfg, kind, seed), lambda: build(cfg, seed), train)


def _train_job(cfg: Config, kind: str, seed: int) -> dict:
    return train_run(cfg, kind, seed).meta


def train_all(cfg: Config, progress: bool = True) -> dict[tuple[str, int], dict]:
    """Train every (kind, seed) whose weights are not cached yet, side by side in worker processes
    (:func:`lab.core.parallel.run_jobs`: ``LAB_WORKERS`` or the cores, ``cfg.threads`` threads each), longest
    first; :func:`train_run` then loads each from the cache. Each training seeds itself, so its weights are those of
    a training here, bit for bit. Below :data:`SERIAL_BELOW_S` estimated CPU seconds in all (ci) it trains here.

    Returns:
        ``{(kind, seed): meta}`` of the trainings that ran now (``meta["cpu_s"]``, ``meta["wall_s"]``).
    """
    from lab.core.parallel import Job, run_jobs

    tim = timing(cfg)
    t = tim.before_response + tim.response  # time steps of a trial
    jobs, pairs = [], []
    for seed in cfg.seeds:
        for kind in KINDS:
            steps = cfg.ddpm_steps if kind == "ddpm" else cfg.mse_steps
            jobs.append(Job(f"{kind} seed {seed}", _train_job, (cfg, kind, seed),
                            cost=steps * t * STEP_S_PER_TIME_STEP,
                            cached=state_path("vwm_rnn", kind, _key(cfg, kind, seed)).exists()))
            pairs.append((kind, seed))
    small = sum(job.cost for job in jobs if not job.cached) < SERIAL_BELOW_S
    done = run_jobs(jobs, workers=1 if small else None, threads_per_worker=cfg.threads, progress=progress,
                    desc="VWM RNN trainings")
    return {pair: r.value for pair, r in zip(pairs, done) if r.ran}


def eval_trials(cfg: Config) -> M.Trials:
    """The evaluation trials (the same for every seed and model)."""
    g = torch.Generator().manual_seed(cfg.seed * 1_000_003 + EVAL_STREAM)
    return M.sample_trials(cfg.n_eval, g, cfg.swap_max, cfg.swap_width)


def outputs(cfg: Config, net: M.RateRNN | None, trials: M.Trials, seed: int, ddpm: bool) -> torch.Tensor:
    """Responses ``(n, 2)`` in the output plane: the network's (sampled by reverse diffusion when ``ddpm``, else its
    free-running output at the end of the response period), or the generator's own draws when ``net`` is None."""
    g = torch.Generator().manual_seed(int(seed) * 1_000_003 + EVAL_STREAM + 1)
    if net is None:
        return M.behaviour(trials, cfg.radius, cfg.target_sd, g)
    s = M.inputs(trials, timing(cfg), cfg.n_locations, cfg.tuning)
    return net.sample(s, timing(cfg).before_response, schedule(cfg) if ddpm else None, g)


def respond(cfg: Config, net: M.RateRNN | None, trials: M.Trials, seed: int, ddpm: bool) -> np.ndarray:
    """Reported colours ``(n,)`` in radians: the angles of :func:`outputs`."""
    x = outputs(cfg, net, trials, seed, ddpm)
    return torch.atan2(x[:, 1], x[:, 0]).numpy().astype(float)
