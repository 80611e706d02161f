"""A dashboard's widgets refuse what they do not allow: a value past a slider's end or an option no selector offers
(what a crafted websocket message can send, a browser cannot) is a one-line error naming the widget's parameter,
the value and what is allowed, and the parameter keeps its value. The CLI and papermill rows of
the same table are in tests/test_bad_inputs.py."""

from __future__ import annotations

import importlib

import pytest

#: (dashboard, panel class, parameter, bad value, fragments of the one-line error)
WIDGET_ROWS = [
    ("hopfield", "Dashboard", "N", 1001, ["'Dashboard.N'", "at most 1000", "not 1001"]),
    ("hopfield", "Dashboard", "N", 32, ["'Dashboard.N'", "at least 64", "not 32"]),
    ("hopfield", "Dashboard", "alpha", 0.5, ["'Dashboard.alpha'", "at most 0.3", "not 0.5"]),
    ("hopfield", "Dashboard", "m0", 0.0, ["'Dashboard.m0'", "at least 0.05", "not 0.0"]),
    ("hopfield", "Dashboard", "trials", 21, ["'Dashboard.trials'", "at most 20", "not 21"]),
    ("hopfield", "Dashboard", "seed", 10_001, ["'Dashboard.seed'", "at most 10000", "not 10001"]),
    ("hopfield", "Dashboard", "update", "never", ["'Dashboard.update'", "does not accept 'never'", "sync"]),
    ("hopfield", "Dashboard", "n", 5, ["'Dashboard.n'", "does not accept 5", "2, 3, 4"]),
    ("agents", "RatePanel", "corridor_length", 3001, ["'RatePanel.corridor_length'", "at most 3000", "not 3001"]),
    ("agents", "RatePanel", "profile", "full", ["'RatePanel.profile'", "does not accept 'full'", "quick, ci"]),
    ("agents", "LwailPanel", "seed", 10, ["'LwailPanel.seed'", "at most 9", "not 10"]),
    ("agents", "LwailPanel", "variant", "bc", ["'LwailPanel.variant'", "does not accept 'bc'", "lwail"]),
    ("expressiveness", "LtlPanel", "length", 10_001, ["'LtlPanel.length'", "at most 10000", "not 10001"]),
    ("expressiveness", "PsmPanel", "chunks", 0, ["'PsmPanel.chunks'", "at least 1", "not 0"]),
    ("pruning", "Dashboard", "ratio", 0.99, ["'Dashboard.ratio'", "at most 0.95", "not 0.99"]),
    ("pruning", "Dashboard", "kind", "gru", ["'Dashboard.kind'", "does not accept 'gru'", "lru, s5"]),
    ("reasoning", "ToolPanel", "step", 5001, ["'ToolPanel.step'", "at most 5000", "not 5001"]),
    ("reasoning", "ToolPanel", "model", "rnn", ["'ToolPanel.model'", "does not accept 'rnn'", "mamba"]),
    ("recurrsim", "Dashboard", "K", 129, ["'Dashboard.K'", "at most 128", "not 129"]),
    ("recurrsim", "Dashboard", "equation", "heat", ["'Dashboard.equation'", "does not accept 'heat'", "burgers"]),
    ("steer", "Dashboard", "amplitude", 2.0, ["'Dashboard.amplitude'", "at most 1.5", "not 2.0"]),
    ("steer", "Dashboard", "pattern", "square", ["'Dashboard.pattern'", "does not accept 'square'", "periodic"]),
    ("forgetting", "RemPanel", "seed_offset", 10, ["'RemPanel.seed_offset'", "at most 9", "not 10"]),
    ("compact_models", "Ssdi8Panel", "index", 64, ["'Ssdi8Panel.index'", "at most 63", "not 64"]),
]


@pytest.mark.parametrize(("app", "panel", "name", "value", "fragments"), WIDGET_ROWS,
                         ids=[f"{r[0]}.{r[2]}={r[3]!r}" for r in WIDGET_ROWS])
def test_a_widget_refuses_a_value_it_does_not_allow_in_one_line(app, panel, name, value, fragments):
    cls = getattr(importlib.import_module(f"dashboards.{app}"), panel)
    before = cls.param[name].default
    try:
        with pytest.raises(ValueError) as info:
            setattr(cls, name, value)  # the class's parameter: the same check as a session's, without a session
    finally:
        cls.param[name].default = before
    message = str(info.value)
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    assert cls.param[name].default == before
