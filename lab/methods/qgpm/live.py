"""What a dashboard (``forgetting``) or a notebook computes besides ``run``: one variant's accuracy matrix and the
memory-against-accuracy table of every variant, for the config's first seed; memoised in the process
(:func:`lab.cache.memo`), each run cached on disk by :mod:`.train` (the first call trains what is missing: about
ten seconds a variant at ``quick``).

    from lab.methods.qgpm import live, plots
    plots.accuracy_matrix(live.accuracy_matrix("quick", "qgpm4"))
    plots.memory_vs_accuracy(live.memory_vs_accuracy("quick"))
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from lab.cache import memo
from lab.core import continual as C
from lab.core.runtime import threads
from lab.methods.qgpm.config import Config
from lab.methods.qgpm.train import load_stream, memory_budget, run_variant, variants

__all__ = ["accuracy_matrix", "config", "memory_vs_accuracy", "variant_labels"]


def config(profile: str = "quick", **overrides) -> Config:
    """The profile's config (overrides as for :meth:`lab.config.BaseConfig.from_profile`)."""
    return Config.from_profile(profile, **overrides)


def variant_labels(profile: str = "quick") -> dict[str, str]:
    """The variants of a profile: name -> label (``{"finetune": "fine-tuning", "qgpm4": "QGPM 4-bit", ...}``)."""
    return {v.name: v.label for v in variants(config(profile))}


@memo(64)
def _run(cfg: Config, name: str) -> dict:
    by_name = {v.name: v for v in variants(cfg)}
    if name not in by_name:
        from lab.checks import bad_value

        raise bad_value("variant", name, ", ".join(by_name))
    stream = load_stream(cfg)
    budget = None
    if name == "gpm_mm":  # within 8-bit QGPM's bytes, as in the run
        budget = memory_budget(cfg, stream, np.asarray(_run(cfg, "qgpm8")["bytes"])[-1])
    with threads(cfg.threads):
        return run_variant(cfg, stream, by_name[name], cfg.seed, budget=budget)


@memo(64)
def accuracy_matrix(profile: str = "quick", variant: str = "qgpm4") -> xr.DataArray:
    """The accuracy matrix of one variant (first seed of the profile).

    Arguments:
        profile: ``ci``, ``quick`` or ``full``. variant: a key of :func:`variant_labels`.

    Returns:
        ``(after, task)`` DataArray of test accuracy (%); attrs ``label``, ``acc``, ``bwt``, ``plasticity``.
    """
    cfg = config(profile)
    R = np.asarray(_run(cfg, variant)["R"], float)  # (T, T)
    m = C.metrics(R)
    T = len(R)
    return xr.DataArray(R, dims=("after", "task"), coords={"after": np.arange(T), "task": np.arange(T)},
                        name="accuracy", attrs={"label": variant_labels(profile)[variant], "acc": m.acc,
                                                "bwt": m.bwt, "plasticity": m.plasticity, "units": "%",
                                                "long_name": "test accuracy on task j after training task i"})


@memo(8)
def memory_vs_accuracy(profile: str = "quick") -> xr.Dataset:
    """Every variant's basis memory after the last task against its ACC and BWT (first seed of the profile).

    Returns:
        Dataset over ``variant``: ``memory_kib``, ``acc``, ``bwt``, ``plasticity`` and the coordinate ``label``.
    """
    cfg = config(profile)
    names = [v.name for v in variants(cfg)]
    rows = {"memory_kib": [], "acc": [], "bwt": [], "plasticity": []}
    for name in names:
        out = _run(cfg, name)
        m = C.metrics(np.asarray(out["R"], float))
        rows["memory_kib"].append(float(np.asarray(out["bytes"])[-1].sum()) / 1024)
        rows["acc"].append(m.acc)
        rows["bwt"].append(m.bwt)
        rows["plasticity"].append(m.plasticity)
    labels = variant_labels(profile)
    return xr.Dataset({k: ("variant", np.asarray(v)) for k, v in rows.items()},
                      coords={"variant": names, "label": ("variant", [labels[n] for n in names])})
