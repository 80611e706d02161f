"""The Config contract: profiles, coercion of CLI strings, bounds declared on the fields, one error style."""

from __future__ import annotations

import dataclasses
from typing import Annotated, ClassVar, Literal

import pytest

from lab.checks import bad_value, check_choice, check_int, check_real
from lab.config import BaseConfig, Choices, ConfigError, Each, Range, coerce, describe_fields, field_specs


@dataclasses.dataclass(frozen=True)
class Toy(BaseConfig):
    """A config with one field of every kind."""

    PROFILES: ClassVar = {"ci": dict(N=32, loads=(0.1,)), "quick": {}, "full": dict(N=4096)}

    N: Annotated[int, Range(16, 100_000)] = 512
    """Number of spins."""
    eps: Annotated[float, Range(0, 1, lo_open=True, hi_open=True)] = 0.02
    """Convergence tolerance."""
    update: Literal["sync", "async"] = "sync"
    """Synchronous or asynchronous sweeps."""
    loads: Annotated[tuple[float, ...], Range(0, 10, lo_open=True), Each(increasing=True)] = (0.1, 0.2)
    """Loads alpha to simulate."""
    kinds: Annotated[tuple[str, ...], Choices("lru", "s5"), Each(unique=True)] = ("lru", "s5")
    """Layers to train."""
    cap: Annotated[int | None, Range(1, 10)] = None
    """An optional cap (None: no cap)."""
    flag: bool = False
    """A switch."""

    def validate(self) -> None:
        if self.N * len(self.loads) > 200_000:
            raise bad_value("N", self.N, f"at most {200_000 // len(self.loads)} with {len(self.loads)} loads")


def test_quick_profile_is_the_field_defaults():
    assert Toy.from_profile("quick") == Toy()


def test_profiles_override_defaults_and_overrides_win():
    assert Toy.from_profile("ci").N == 32
    assert Toy.from_profile("ci", N="200").N == 200


def test_strings_are_parsed_to_field_types():
    assert coerce(Toy, "loads", "0.2,0.5,1") == (0.2, 0.5, 1.0)
    assert coerce(Toy, "update", "async") == "async"
    assert coerce(Toy, "N", "64") == 64
    assert coerce(Toy, "cap", "none") is None and coerce(Toy, "cap", "3") == 3


@pytest.mark.parametrize(
    ("field", "value", "fragment"),
    [
        ("N", "-5", "N=-5 is not allowed; allowed: an integer in [16, 100000]"),
        ("N", "abc", "N='abc' is not allowed; allowed: an integer in [16, 100000]"),
        ("N", 3.5, "N=3.5 is not allowed; allowed: an integer in [16, 100000]"),
        ("eps", "1", "eps=1.0 is not allowed; allowed: a finite number in (0, 1)"),
        ("update", "sometimes", "one of 'sync', 'async'"),
        ("loads", "0.2,0.1", "strictly increasing"),
        ("loads", "0,1", "each value a finite number in (0, 10]"),
        ("kinds", "lru,gru", "each value one of 'lru', 's5'"),
        ("kinds", "lru,lru", "no repeats"),
        ("cap", "11", "in [1, 10]"),
        ("flag", "maybe", "flag='maybe' is not allowed; allowed: true or false"),
        ("seed", "-1", "seed=-1 is not allowed"),
    ],
)
def test_bad_values_name_field_value_and_what_is_allowed(field, value, fragment):
    with pytest.raises(ConfigError) as info:
        Toy.from_profile("quick", **{field: value})
    assert fragment in str(info.value)


def test_bounds_are_checked_on_direct_construction_too():
    with pytest.raises(ConfigError, match="N=8 is not allowed"):
        Toy(N=8)
    with pytest.raises(ConfigError, match="update='x'"):
        Toy(update="x")  # type: ignore[arg-type]


def test_cross_field_rule_in_validate():
    with pytest.raises(ConfigError, match="N=100000 is not allowed; allowed: at most 66666 with 3 loads"):
        Toy(N=100_000, loads=(0.1, 0.2, 0.3))


def test_unknown_field_lists_the_fields():
    with pytest.raises(ConfigError, match="no parameter 'bogus'.*allowed: .*loads"):
        Toy.from_profile("quick", bogus=1)


def test_unknown_profile():
    with pytest.raises(ConfigError, match="profile='huge' is not allowed; allowed: ci, quick, full"):
        Toy.from_profile("huge")


def test_configs_are_frozen_and_round_trip_json():
    cfg = Toy.from_profile("ci", cap=3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.N = 3
    assert Toy.from_json(cfg.to_json()) == cfg


def test_field_specs_carry_type_doc_and_bounds():
    specs = field_specs(Toy)
    assert list(specs) == ["seed", "N", "eps", "update", "loads", "kinds", "cap", "flag"]
    assert specs["N"].range == Range(16, 100_000) and specs["N"].element_type is int
    assert specs["update"].choices == ("sync", "async")
    assert specs["kinds"].choices == ("lru", "s5") and specs["kinds"].is_tuple
    assert specs["cap"].optional and specs["cap"].element_type is int
    assert specs["loads"].doc == "Loads alpha to simulate."
    assert all(s.bounded for s in specs.values())
    rows = {r["name"]: r for r in describe_fields(Toy)}
    assert rows["N"]["allowed"] == "an integer in [16, 100000]"


def test_plain_argument_checks_share_the_style():
    assert check_int("steps", 3, 1) == 3
    with pytest.raises(ConfigError, match=r"steps=0 is not allowed; allowed: an integer in \[1, inf\)"):
        check_int("steps", 0, 1)
    with pytest.raises(ConfigError, match="steps=True is not allowed"):
        check_int("steps", True, 1)
    with pytest.raises(ConfigError, match="dt=nan is not allowed; allowed: a finite number"):
        check_real("dt", float("nan"), 0)
    with pytest.raises(ConfigError, match="kind='x' is not allowed; allowed: one of 'a', 'b'"):
        check_choice("kind", "x", ("a", "b"))
