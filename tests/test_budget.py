"""Work bounded before it starts (issue 35, item 4): every method's Config states the memory and work its run needs
(``run_budget``), and ``lab.budget.check_budget`` (called by ``lab.api.check_machine``) refuses in one line, before
any work, a run beyond this machine's share of memory (``LAB_MAX_MEMORY_GIB``) or the work cap (``LAB_MAX_WORK``)."""

from __future__ import annotations

import dataclasses
import re
import time
from typing import Annotated, ClassVar

import pytest

import lab
from lab import registry
from lab.api import check_machine
from lab.budget import DEFAULT_MAX_WORK, GIB, Budget, budget_of, check_budget, limits
from lab.config import PROFILE_NAMES, BaseConfig, ConfigError, Range

SLUGS = registry.slugs()
#: this machine's allowance (60% of 24 GiB) and a 16 GiB laptop's
MACHINES = {"24 GiB": 14.4, "16 GiB laptop": 9.6}

#: per method, field values within their declared bounds that no machine of the lab should take on
ABSURD = {
    "dam": dict(trials=10000, steps=10000),
    "aire_prune": dict(epochs=10000, d_model=1024),
    "arena": dict(steps=1_000_000, budget=10_000_000, n_seeds=100),
    "chaingpt": dict(steps=1_000_000, d_model=1024),
    "compressm": dict(epochs=10000, d_state=4096),
    "diffusion_blocks": dict(n_eval=100_000),
    "lwail": dict(env_steps=10_000_000),
    "psm": dict(steps=1_000_000, d_model=1024),
    "qgpm": dict(hidden="4096,4096,4096,4096", thresholds="0.9,0.9,0.9,0.9,0.9", n_tasks=10),
    "rate": dict(eval_lengths="10,30,90,300,100000", n_eval=100_000),
    "recurrsim": dict(equations="navier_stokes", grid_2d=512, iterations=10_000_000),
    "rem": dict(hidden=4096, n_hidden=8, epochs=10000),
    "ssdi8": dict(seq_len=8192, batch_size=4096),
    "ssm_inr": dict(data="shapes_video", size=512, frames=64, budget=10_000_000, rd_budgets="10000000"),
    "ssm_ltl": dict(check_length=100_000, check_words=1000),
    "steer": dict(T=100_000, K_train=10_000, N=500),
    "tbptt": dict(lengths="50,100000", n_train=10_000_000, stride=1),
    "tool_ssm": dict(test_lengths="5,10,20,50,100,100000", n_test=100_000),
    "vwm_rnn": dict(n_eval=10_000_000, hidden=4096),
    "wsc": dict(hidden="4096,4096,4096,4096", steps_per_task=1_000_000, n_seeds=100),
}

_NEEDS = re.compile(r"the run needs ([0-9.e+]+) (GiB|operations) \(")


@pytest.fixture
def machine(monkeypatch):
    """Set the memory allowance (GiB) and unset the work cap: ``machine(14.4)``."""
    monkeypatch.delenv("LAB_MAX_WORK", raising=False)

    def set_gib(gib: float) -> None:
        monkeypatch.setenv("LAB_MAX_MEMORY_GIB", str(gib))

    return set_gib


def test_every_registered_method_is_in_the_absurd_table():
    assert sorted(ABSURD) == sorted(SLUGS)


@pytest.mark.parametrize("slug", SLUGS)
def test_every_method_states_its_own_budget(slug):
    cls = registry.get(slug).config
    assert cls.run_budget is not BaseConfig.run_budget, f"{slug}'s Config has no run_budget()"
    doc = (cls.run_budget.__doc__ or "").lower()
    assert "work" in doc and "memory" in doc, "the docstring says what dominates the work and the memory"
    b = budget_of(cls.from_profile("quick"))
    assert isinstance(b, Budget) and b.memory_bytes > 0 and b.work > 0 and b.what
    assert set(b.fields) <= {f.name for f in dataclasses.fields(cls)}, "a budget names a field its Config lacks"


@pytest.mark.parametrize("slug", SLUGS)
@pytest.mark.parametrize("where", list(MACHINES))
def test_every_profile_fits_this_machine_and_a_laptop(slug, where, machine):
    machine(MACHINES[where])
    for profile in PROFILE_NAMES:
        b = check_budget(registry.get(slug).make_config(profile))
        assert b.memory_bytes <= MACHINES[where] * GIB, f"{slug} {profile}: {b.memory_gib:.1f} GiB"
        assert b.work <= DEFAULT_MAX_WORK / 3, f"{slug} {profile}: {b.work:.1e} operations, no margin"


@pytest.mark.parametrize("slug", SLUGS)
def test_an_absurd_input_in_range_is_refused_in_one_line(slug, machine):
    machine(MACHINES["24 GiB"])
    cfg = registry.get(slug).make_config("quick", **ABSURD[slug])  # every value within its field's bounds
    with pytest.raises(ConfigError) as err:
        check_budget(cfg)
    msg = str(err.value)
    assert "\n" not in msg and "; allowed: " in msg
    named = msg.split(" is not allowed")[0]
    assert any(named.startswith(f"{field}=") or f", {field}=" in named for field in ABSURD[slug]), msg
    need = _NEEDS.search(msg)
    assert need, msg
    if need.group(2) == "GiB":
        assert float(need.group(1)) > MACHINES["24 GiB"] and "14.4 GiB (LAB_MAX_MEMORY_GIB)" in msg
    else:
        assert float(need.group(1)) > DEFAULT_MAX_WORK and "LAB_MAX_WORK" in msg


@pytest.mark.parametrize("slug, overrides, fields, unit", [
    ("dam", dict(trials=10000, steps=10000), "trials=10000, steps=10000", "GiB"),
    ("qgpm", dict(hidden="4096,4096,4096,4096", thresholds="0.9,0.9,0.9,0.9,0.9", n_tasks=10),
     "hidden=4096,4096,4096,4096, n_tasks=10", "operations"),
    ("ssm_ltl", dict(check_length=100_000, check_words=1000), "check_length=100000, check_words=1000", "GiB"),
])
def test_the_issues_inputs_fail_fast_before_any_work(slug, overrides, fields, unit, machine, monkeypatch):
    machine(MACHINES["24 GiB"])
    ran = []
    monkeypatch.setattr(type(registry.get(slug)), "run_fn", property(lambda self: lambda *a, **k: ran.append(1)))
    start = time.perf_counter()
    with pytest.raises(ConfigError) as err:
        lab.run(slug, "quick", progress=False, **overrides)
    assert time.perf_counter() - start < 1.0
    assert not ran, "the run started"
    msg = str(err.value)
    assert msg.startswith(f"{fields} is not allowed: the run needs ") and f" {unit} (" in msg and "\n" not in msg


def test_check_machine_checks_the_budget(machine):
    machine(0.001)
    with pytest.raises(ConfigError, match=r"this machine allows 0\.0 GiB \(LAB_MAX_MEMORY_GIB\)"):
        check_machine(registry.get("dam").make_config("ci"))


def test_the_work_cap_follows_the_environment(monkeypatch):
    cfg = registry.get("dam").make_config("quick")
    monkeypatch.setenv("LAB_MAX_WORK", "1e6")
    with pytest.raises(ConfigError, match=r"^trials=10, steps=20, N=512 is not allowed: the run needs 9\.\de\+11 "
                                          r"operations .* allows 1e\+06 \(LAB_MAX_WORK\)"):
        check_budget(cfg)
    monkeypatch.setenv("LAB_MAX_WORK", "1e20")
    monkeypatch.setenv("LAB_MAX_MEMORY_GIB", "1000")
    assert limits()[:2] == (1000 * GIB, 1e20)


@pytest.mark.parametrize("name, value", [("LAB_MAX_MEMORY_GIB", "lots"), ("LAB_MAX_MEMORY_GIB", "-1"),
                                         ("LAB_MAX_WORK", "inf"), ("LAB_MAX_WORK", "0")])
def test_a_bad_limit_in_the_environment_is_one_line(name, value, monkeypatch):
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError, match=rf"^{name}='{re.escape(value)}' is not allowed; allowed: a positive"):
        check_budget(registry.get("dam").make_config("ci"))


def test_the_default_memory_limit_is_a_share_of_the_machine(monkeypatch):
    import psutil

    monkeypatch.delenv("LAB_MAX_MEMORY_GIB", raising=False)
    memory, _, where, _ = limits()
    assert memory == pytest.approx(0.6 * psutil.virtual_memory().total) and "LAB_MAX_MEMORY_GIB" in where


@dataclasses.dataclass(frozen=True)
class NoBudget(BaseConfig):
    """A Config that states no budget."""

    PROFILES: ClassVar = {"ci": {}, "quick": {}, "full": {}}

    N: Annotated[int, Range(1, 10)] = 2
    """A size."""


def test_a_config_without_a_budget_is_refused():
    with pytest.raises(NotImplementedError):
        NoBudget().run_budget()
    with pytest.raises(ConfigError, match=r"^config=.*NoBudget is not allowed: it states no budget; allowed: "):
        check_budget(NoBudget())


def test_the_error_names_the_fields_beyond_the_quick_profile(machine):
    machine(MACHINES["24 GiB"])
    cfg = registry.get("dam").make_config("quick", trials=10000, steps=10000, eps=0.5)
    with pytest.raises(ConfigError) as err:
        check_budget(cfg)
    assert str(err.value).startswith("trials=10000, steps=10000 is not allowed")  # eps does not drive the budget


def test_dams_pattern_guard_still_refuses_at_construction():
    with pytest.raises(ConfigError, match=r"^N=100000 is not allowed; allowed: at most 4 GiB of patterns"):
        registry.get("dam").make_config("quick", n=4, N=100_000)


def test_dams_budget_table_of_critical_loads_bounds_the_theory():
    from lab.methods.dam import theory
    from lab.methods.dam.config import CRITICAL_LOADS

    assert CRITICAL_LOADS[2] >= theory.ags_capacity()[0]
    for n in range(3, 7):
        assert theory.critical_load(n) <= CRITICAL_LOADS[n] <= 1.01 * theory.critical_load(n)
