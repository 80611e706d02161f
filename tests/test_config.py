"""The Config contract: profiles, coercion of CLI strings, validation messages that name field, value and range."""

import dataclasses

import pytest

from lab.config import ConfigError, coerce, describe_fields, field_docs
from lab.methods.dam.config import Config


def test_quick_profile_is_the_field_defaults():
    assert Config.from_profile("quick") == Config()


def test_profiles_override_defaults_and_overrides_win():
    ci = Config.from_profile("ci")
    assert ci.N == Config.PROFILES["ci"]["N"]
    assert Config.from_profile("ci", N="200").N == 200


def test_strings_are_parsed_to_field_types():
    assert coerce(Config, "m0s", "0.2,0.5,1") == (0.2, 0.5, 1.0)
    assert coerce(Config, "update", "async") == "async"
    assert coerce(Config, "N", "64") == 64


@pytest.mark.parametrize(
    ("field", "value", "fragment"),
    [
        ("N", "-5", "allowed range"),
        ("N", "abc", "not a valid int"),
        ("update", "sometimes", "'sync', 'async'"),
        ("alphas", "0.1,0.05", "strictly increasing"),
        ("eps", "2", "allowed range"),
    ],
)
def test_bad_values_name_field_value_and_what_is_allowed(field, value, fragment):
    with pytest.raises(ConfigError) as info:
        Config.from_profile("quick", **{field: value})
    message = str(info.value)
    assert field in message and fragment in message


def test_unknown_field_lists_the_fields():
    with pytest.raises(ConfigError, match="unknown parameter 'bogus'.*allowed: .*alphas"):
        Config.from_profile("quick", bogus=1)


def test_unknown_profile():
    with pytest.raises(ConfigError, match="allowed: ci, quick, full"):
        Config.from_profile("huge")


def test_configs_are_frozen_and_round_trip_json():
    cfg = Config.from_profile("ci")
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.N = 3
    assert Config.from_json(cfg.to_json()) == cfg


def test_every_field_has_a_docstring():
    docs = field_docs(Config)
    missing = [f.name for f in dataclasses.fields(Config) if not docs.get(f.name)]
    assert missing == []
    assert all(row["doc"] for row in describe_fields(Config))


def test_too_large_pattern_matrix_is_refused_before_allocating():
    with pytest.raises(ConfigError, match="GiB"):
        Config(n=4, N=2000, alphas=(0.02,))
