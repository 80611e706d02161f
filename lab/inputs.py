"""The command line's inputs, parsed and checked before any work: ``-p FIELD=VALUE``, ``-g FIELD=V1,V2``,
``--seeds 0-9`` and a sweep's points. Every bad one is a :class:`~lab.checks.ConfigError` of one line that names it
as typed (``-p``, ``-g``, ``--seeds``), the value and what is allowed; ``lab.cli`` turns it into exit 2."""

from __future__ import annotations

import math
from typing import Any

from lab.checks import ConfigError, bad_value
from lab.sweep import MAX_SWEEP_POINTS

__all__ = ["MAX_SWEEP_POINTS", "SEEDS_ALLOWED", "parse_grid", "parse_params", "parse_seeds", "sweep_inputs"]

SEEDS_ALLOWED = "seeds as 0-9, 0,3,7 or 0-2,5 (non-negative integers, ranges low-high)"


def parse_params(params: tuple[str, ...], option: str = "-p") -> dict[str, str]:
    """``FIELD=VALUE`` items as a dict; a malformed or repeated item is refused, labelled as typed (-p, -g)."""
    example = "-p N=512, lists as -p m0s=0.2,0.5" if option == "-p" else "-g N=64,128"
    out: dict[str, str] = {}
    for item in params:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"{option} {item!r} is not allowed; allowed: FIELD=VALUE (e.g. {example})")
        if key in out:
            raise ConfigError(f"{option} {key}={value.strip()} is not allowed: {option} {key}={out[key]} was given "
                              f"before; allowed: each field once")
        out[key] = value.strip()
    return out


def parse_seeds(text: str) -> list[int]:
    """``"0-9"``, ``"0,3,7"`` or ``"0-2,5"`` as a list of distinct seeds, at most :data:`MAX_SWEEP_POINTS` of them
    (counted before a range is expanded)."""
    ranges: list[range] = []
    for part in (p.strip() for p in text.split(",")):
        lo, sep, hi = part.partition("-")
        try:
            values = range(int(lo), int(hi) + 1) if sep else range(int(part), int(part) + 1)
        except ValueError:
            raise bad_value("--seeds", text, SEEDS_ALLOWED) from None
        if not values or values.start < 0:
            raise bad_value("--seeds", text, SEEDS_ALLOWED)
        ranges.append(values)
    count = sum(len(r) for r in ranges)
    if count > MAX_SWEEP_POINTS:
        raise bad_value("--seeds", text, f"at most {MAX_SWEEP_POINTS} seeds (this is {count})")
    seeds = [s for r in ranges for s in r]
    if len(set(seeds)) != len(seeds):
        raise bad_value("--seeds", text, "each seed once (ranges that do not overlap)")
    return seeds


def parse_grid(grid: tuple[str, ...], config: type, slug: str) -> dict[str, list[str]]:
    """``-g FIELD=V1,V2`` items as ``{field: [values]}``: a field of ``config``, one value or more, none twice."""
    from lab.config import field_specs

    axes: dict[str, list[str]] = {}
    allowed = list(field_specs(config))
    for key, text in parse_params(grid, "-g").items():
        if key not in allowed:
            raise ConfigError(f"-g {key}={text} is not allowed: {slug} has no parameter {key!r}; allowed: "
                              + ", ".join(allowed))
        values = [v.strip() for v in text.split(",")]
        if not text or any(v == "" for v in values):
            raise ConfigError(f"-g {key}={text!r} is not allowed; allowed: one or more comma-separated values "
                              f"(e.g. -g {key}=V1,V2)")
        twice = sorted({v for v in values if values.count(v) > 1})
        if twice:
            raise ConfigError(f"-g {key}={text} is not allowed: {', '.join(twice)} given twice; allowed: each "
                              f"value once")
        axes[key] = values
    return axes


def _labelled(option: str, make: Any) -> Any:
    try:
        return make()
    except ConfigError as exc:
        raise ConfigError(f"{option} {exc}") from None


def sweep_inputs(method: Any, profile: str, grid: tuple[str, ...], params: tuple[str, ...], seeds: str | None
                 ) -> tuple[dict[str, list[str]], dict[str, str], list[int] | None]:
    """A ``lab sweep``'s axes, fixed overrides and seeds, every point checked (its Config and its budget) before
    any of them runs, and their work together within the machine's cap (:func:`lab.budget.limits`); each error
    labelled with the option that set the value."""
    from lab.budget import check_budget, limits
    from lab.sweep import grid_points

    if not grid and seeds is None:
        raise ConfigError("-g and --seeds are both missing; allowed: at least one -g FIELD=V1,V2 or --seeds 0-9")
    axes = parse_grid(grid, method.config, method.slug)
    fixed = parse_params(params)
    twice = sorted(set(axes) & set(fixed))
    if twice:
        raise ConfigError(f"-p {twice[0]}={fixed[twice[0]]} is not allowed: {twice[0]} is also swept by -g; "
                          f"allowed: a field either fixed (-p) or swept (-g)")
    seed_list = parse_seeds(seeds) if seeds is not None else None
    if seed_list is not None and "seed" in axes:
        raise ConfigError(f"--seeds {seeds} is not allowed: -g seed=... sweeps the seed too; allowed: one of them")
    count = math.prod(len(v) for v in axes.values()) * (len(seed_list) if seed_list else 1)
    if count > MAX_SWEEP_POINTS:
        shown = " ".join(f"-g {k}={','.join(v)}" for k, v in axes.items())
        raise ConfigError(f"{shown} is not allowed: {count} points; allowed: at most {MAX_SWEEP_POINTS} points "
                          f"(grid values times seeds)")
    _labelled("-p", lambda: method.make_config(profile, **fixed))
    for key, values in axes.items():
        for value in values:
            _labelled("-g", lambda: method.make_config(profile, **{**fixed, key: value}))  # noqa: B023
    work = 0.0
    for point in grid_points(axes):
        cfg = _labelled("-g", lambda: method.make_config(profile, **{**fixed, **point}))  # noqa: B023
        work += _labelled("-g", lambda: check_budget(cfg)).work * (len(seed_list) if seed_list else 1)  # noqa: B023
    _, max_work, _, work_src = limits()
    if work > max_work:
        raise ConfigError(f"lab sweep {method.slug} with {count} points is not allowed: together they need "
                          f"{work:.1e} operations and this machine allows {max_work:.0e} ({work_src}); allowed: "
                          f"fewer points or seeds, or smaller ones")
    return axes, fixed, seed_list
