"""Measurements over seeds and the measure builders a method's ``claims.py`` is written with."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Measurement:
    """A measured value with what explains it.

    Arguments:
        value: the statistic compared with the threshold (a mean, a worst seed, a bound...).
        detail: a few words that explain the value.
        per_seed: the value on each seed, when the claim is measured over seeds (the table shows their spread and
            on how many seeds the claim holds).
        repeats: what ``per_seed`` counts, as the table names it (``seeds``; ``trials`` for values over trials).
    """

    value: float
    detail: str = ""
    per_seed: tuple[float, ...] | None = None
    repeats: str = "seeds"


def over_seeds(values: Any, statistic: str = "mean", detail: str = "", repeats: str = "seeds") -> Measurement:
    """A :class:`Measurement` of per-seed ``values`` (NaN seeds kept: they make ``mean`` and ``worst`` NaN).

    Arguments:
        values: one value per seed.
        statistic: ``mean``, ``min`` or ``max`` (say the worst seed in the claim's statement).
        repeats: what the values are over, as the table names them (``trials`` where they are not seeds).
    """
    arr = np.asarray(values, dtype=float).ravel()
    stat = {"mean": np.mean, "min": np.min, "max": np.max}[statistic]
    value = float(stat(arr)) if arr.size else math.nan
    return Measurement(value, detail, tuple(float(v) for v in arr), repeats)


#: the unit of a claim measured as the share of seeds on which something holds (:func:`seed_share`)
SEED_SHARE_UNIT = "of seeds"

#: the bar of a seed-majority claim: a share of seeds above 3/4 (ties never pass), so 4 of 5 seeds, or all of 3
#: or 4; a coin passes "more than half the seeds" too often (a batch-order control won 2 of 3)
MIN_SEED_SHARE = 0.75


def seed_share(wins: Any, detail: str = "") -> Measurement:
    """The share of seeds on which a claim holds, from per-seed 0/1 ``wins`` (unit :data:`SEED_SHARE_UNIT`).

    A claim over this measure requires ``> MIN_SEED_SHARE`` (4 of 5 seeds) or more; the contract test checks it.
    """
    return over_seeds(np.asarray(wins, dtype=float), "mean", detail)


# --- measure builders: a claims.py reads as a table -------------------------------------------------------------


def _fmt(x: float) -> str:
    return f"{x:.3g}" if (x != 0 and (abs(x) >= 1e4 or abs(x) < 1e-3)) else f"{x:.4g}"


@dataclass(frozen=True)
class Pick:
    """One quantity per seed, read from a results Dataset: ``ds[var]`` selected by label (``sel``) and by position
    (``isel``), then averaged over every dimension left but the seeds' (``seed``).

    A selector's value may be a function of the Dataset (``{"tau": lambda ds: ds.attrs["claim_tau"]}``).

    Arguments:
        var: the variable.
        label: what it is, in a few words, for the detail text (e.g. "CompreSSM").
        sel, isel: the selection by coordinate label and by index.
        unit: appended to the values in the detail text (e.g. "%").
        reduce: how the dimensions left but the seeds' become one value per seed: ``mean`` (default), ``max``
            (the best of several variants, e.g. the strongest baseline) or ``min`` (the worst).
        seed: the dimension that counts the seeds (``seed``; another where a part of the run has its own seeds,
            e.g. lwail's ``pendulum_seed``), kept so that the table shows each seed.
    """

    var: str
    label: str
    sel: Any = None
    isel: Any = None
    unit: str = ""
    reduce: str = "mean"
    seed: str = "seed"

    def __post_init__(self) -> None:
        if self.reduce not in ("mean", "max", "min"):
            raise ValueError(f"Pick {self.label!r}: reduce={self.reduce!r} is not allowed; allowed: mean, max, min")

    def values(self, ds: Any) -> np.ndarray:
        """The per-seed values (one value when the variable has no seed dimension)."""
        da = ds[self.var]

        def resolve(spec: Any) -> dict[str, Any]:
            return {k: (v(ds) if callable(v) else v) for k, v in dict(spec or {}).items()}

        if self.isel:
            da = da.isel(resolve(self.isel))
        if self.sel:
            da = da.sel(resolve(self.sel))
        rest = [d for d in da.dims if d != self.seed]
        if rest:
            da = getattr(da, self.reduce)(rest, skipna=False)
        return np.atleast_1d(np.asarray(da.values, dtype=float))

    def text(self, values: np.ndarray) -> str:
        return f"{self.label} {_fmt(float(np.mean(values)))}{self.unit}"


def _noted(text: str, note: Any, ds: Any) -> str:
    """``text`` with the claim's own note (a function of the Dataset) appended."""
    return f"{text}; {note(ds)}" if note is not None else text


def _seeds_text(n: int, statistic: str) -> str:
    what = {"mean": "mean", "min": "worst", "max": "largest"}[statistic]
    return f"{what} over {n} seed{'s' if n != 1 else ''}"


def difference(a: Pick, b: Pick, *, statistic: str = "mean", what: str = "", note: Any = None):
    """A measure: ``a`` minus ``b`` on each seed, summarised by ``statistic`` (mean, min or max).

    ``what`` prefixes the detail text; ``note`` (Dataset -> str) appends the claim's own context to it (a reference
    value, a length, a parameter count). The other builders take the same two."""

    def measure(ds: Any) -> Measurement:
        va, vb = a.values(ds), b.values(ds)
        prefix = f"{what}: " if what else ""
        return over_seeds(va - vb, statistic, _noted(
            f"{prefix}{a.text(va)} vs {b.text(vb)}, {_seeds_text(len(va - vb), statistic)}", note, ds))

    return measure


def ratio(a: Pick, b: Pick, *, statistic: str = "mean", what: str = "", note: Any = None):
    """A measure: ``a`` divided by ``b`` on each seed, summarised by ``statistic`` (mean, min or max)."""

    def measure(ds: Any) -> Measurement:
        va, vb = a.values(ds), b.values(ds)
        prefix = f"{what}: " if what else ""
        with np.errstate(divide="ignore", invalid="ignore"):
            r = va / vb
        return over_seeds(r, statistic, _noted(
            f"{prefix}{a.text(va)} / {b.text(vb)}, {_seeds_text(len(r), statistic)}", note, ds))

    return measure


def share(a: Pick, b: Pick, *, margin: float = 0.0, what: str = "", note: Any = None):
    """A measure (unit :data:`SEED_SHARE_UNIT`): the share of seeds on which ``a`` exceeds ``b`` by more than
    ``margin``."""

    def measure(ds: Any) -> Measurement:
        va, vb = a.values(ds), b.values(ds)
        wins = (va - vb) > margin
        prefix = f"{what}: " if what else ""
        by = f" by more than {_fmt(margin)}{a.unit}" if margin else ""
        return seed_share(wins, _noted(f"{prefix}{a.label} above {b.label}{by} on {int(wins.sum())} of "
                                       f"{len(wins)} seeds ({a.text(va)} vs {b.text(vb)}, mean)", note, ds))

    return measure


def value(a: Pick, *, statistic: str = "mean", what: str = "", note: Any = None):
    """A measure: ``a`` on each seed, summarised by ``statistic`` (mean, min or max)."""

    def measure(ds: Any) -> Measurement:
        va = a.values(ds)
        prefix = f"{what}: " if what else ""
        stat = float({"mean": np.mean, "min": np.min, "max": np.max}[statistic](va)) if va.size else math.nan
        return over_seeds(va, statistic, _noted(f"{prefix}{a.label} {_fmt(stat)}{a.unit}, "
                                                f"{_seeds_text(len(va), statistic)}", note, ds))

    return measure
