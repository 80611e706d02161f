"""What a dashboard (the ``forgetting`` app) or a notebook computes besides ``run``: one variant's accuracy matrix
over the tasks, for one profile, seed and memory share; cached on disk (:func:`lab.cache.cached_state`, keyed by
what decides the matrix, not the threads or device) and memoised in the process (:func:`lab.cache.memo`). On a miss
the matrix comes from the report's current run of the same Config when it made it, else the stream is trained."""

from __future__ import annotations

import numpy as np
import xarray as xr

from lab.cache import cached_state, memo, result_config, saved_run
from lab.checks import check_choice, check_real
from lab.core.runtime import threads
from lab.methods.wsc.config import Config
from lab.methods.wsc.model import VARIANTS
from lab.methods.wsc.train import First, first_task, stream_for, train_stream

__all__ = ["VARIANT_NAMES", "accuracy_matrix", "config"]

#: the variants a view can ask for
VARIANT_NAMES = tuple(VARIANTS)
#: bump when the training changes (invalidates the cached matrices)
VERSION = 1


def config(profile: str = "quick") -> Config:
    """The profile's Config."""
    return Config.from_profile(profile)


@memo(8)
def _first(cfg: Config, seed: int) -> First:
    return first_task(cfg, stream_for(cfg, seed), seed)


def _from_saved_run(cfg: Config, variant: str, share: float, seed: int) -> dict | None:
    """The matrix from the report's current run of this Config (:func:`lab.cache.saved_run`), if it made it."""
    ds = saved_run("wsc", cfg)
    if ds is None or seed not in ds.seed.values or variant not in ds.variant.values:
        return None
    shares = np.flatnonzero(np.isclose(ds.share.values, share, rtol=0, atol=1e-12))
    if len(shares) != 1:
        return None
    at = {"seed": seed, "variant": variant}
    R = ds.accuracy_matrix.sel(at).isel(share=shares[0]).values
    if not np.isfinite(R).all():
        return None  # the run did not make this variant at this share
    return {"R": R, "cpu": float(ds.train_cpu_time.sel(at).isel(share=shares[0]))}


@memo(32)
def accuracy_matrix(profile: str = "quick", variant: str = "wsc", share: float | None = None,
                    seed: int | None = None) -> xr.DataArray:
    """The accuracy matrix of one variant on one seed's stream: ``R[after, task]``, test accuracy (%) on ``task``
    after training ``after``.

    Arguments:
        profile: ``ci``, ``quick`` or ``full`` (the stream, the model and the step budget).
        variant: ``replay``, ``reset``, ``swa``, ``wsc`` or ``replay_b``.
        share: the replay memory share in [0, 1] (default: the profile's claim share).
        seed: the seed (default: the profile's first).

    Returns:
        DataArray ``(after, task)`` in %, with attrs ``acc``, ``bwt``, ``plasticity`` (the run's metrics, %),
        ``variant``, ``share``, ``seed``, ``train_cpu_time`` (s).
    """
    check_choice("variant", variant, VARIANT_NAMES)
    if share is not None:
        share = check_real("share", share, 0.0, 1.0)
    cfg = Config.from_profile(profile, **({} if share is None else {"claim_share": share,
                                                                     "replay_shares": (share,)}))
    share = cfg.claim_share
    seed = cfg.seed if seed is None else int(seed)
    key = {"config": result_config(cfg), "variant": variant, "share": share, "seed": seed, "version": VERSION}

    def build() -> dict:
        saved = _from_saved_run(cfg, variant, share, seed)
        if saved is not None:
            return saved
        with threads(cfg.threads):
            out = train_stream(cfg, stream_for(cfg, seed), seed, _first(cfg, seed), variant, share)
        return {"R": out["R"], "cpu": out["compute"].cpu_s}

    state, _ = cached_state("wsc", f"matrix-{variant}", key, build)
    R = np.asarray(state["R"], dtype=float)
    T = len(R)
    from lab.core.continual import metrics, plasticity

    met = metrics(R)
    return xr.DataArray(R, dims=("after", "task"), coords={"after": np.arange(T), "task": np.arange(T)},
                        name="accuracy", attrs={"units": "%", "long_name": "test accuracy on each task after "
                                                "training each task", "variant": variant, "share": share,
                                                "seed": seed, "acc": met.acc, "bwt": met.bwt,
                                                "plasticity": float(plasticity(R)[1:].mean()),
                                                "train_cpu_time": float(state["cpu"])})
