"""kernels.prefix_scan and StreamingPrefix: one bracketing, parallel and streaming, for non-associative combines;
bounded live states and combine calls; the saturating int8 scan against its Python reference."""

from __future__ import annotations

import math

import pytest
import torch

from kernels.prefix_scan import (
    StreamingPrefix,
    prefix_scan,
    prefix_scan_stacked,
    saturating_scan,
    saturating_scan_ref,
)


def bracket(a, b):
    """A non-associative combine that shows its bracketing: strings."""
    return f"({a},{b})"


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 13, 64, 100])
def test_parallel_and_streaming_bracket_alike(n):
    xs = [str(i) for i in range(n)]
    exclusive = prefix_scan(bracket, xs)
    stream = StreamingPrefix(bracket)
    assert [stream.push(x) for x in xs] == exclusive
    assert exclusive[0] is None  # no identity: nothing before the first chunk
    assert prefix_scan(bracket, xs, exclusive=False)[:-1] == exclusive[1:]


def test_power_of_two_bracketing():
    xs = [str(i) for i in range(8)]
    inclusive = prefix_scan(bracket, xs, exclusive=False)
    assert inclusive[3] == "((0,1),(2,3))"
    assert inclusive[6] == "((((0,1),(2,3)),(4,5)),6)"  # blocks of 4, 2, 1 folded largest first


def test_identity_is_a_flag_never_combined():
    calls = []

    def combine(a, b):
        calls.append((a, b))
        return a + b

    out = prefix_scan(combine, [1, 2, 3], identity="nothing")
    assert out == ["nothing", 1, 3] and all("nothing" not in c for c in calls)


@pytest.mark.parametrize("n", [7, 100, 1000])
def test_live_states_and_calls_per_chunk_are_bounded(n):
    stream = StreamingPrefix(lambda a, b: a + b)
    for i in range(1, n + 1):
        stream.push(1.0)
        assert stream.live_states <= math.floor(math.log2(i)) + 1
    assert stream.calls / n <= 2.0
    assert stream.max_live_states <= math.floor(math.log2(n)) + 1  # a naive stream would hold n states


def test_batched_levels_equal_the_list_form_for_a_learned_combine():
    g = torch.Generator().manual_seed(0)
    W = torch.randn(4, 8, generator=g, dtype=torch.float64)

    def combine(a, b):
        return torch.tanh(torch.cat([a, b], -1) @ W.T)

    xs = torch.randn(37, 4, generator=g, dtype=torch.float64)
    listed, batched = prefix_scan(combine, xs), prefix_scan(combine, xs, batched=True)
    stream = StreamingPrefix(combine)
    streamed = [stream.push(x) for x in xs]
    for a, b, c in zip(listed[1:], batched[1:], streamed[1:]):
        torch.testing.assert_close(a, b)
        torch.testing.assert_close(a, c, rtol=0, atol=0)


def test_associative_combine_gives_the_cumulative_sum():
    xs = torch.arange(10.0)
    out = prefix_scan(lambda a, b: a + b, list(xs), identity=torch.tensor(0.0))
    torch.testing.assert_close(torch.stack(out), torch.cumsum(xs, 0) - xs)


@pytest.mark.parametrize("bits", [4, 8])
def test_saturating_scan_matches_its_reference_and_stays_in_range(bits):
    g = torch.Generator().manual_seed(1)
    a = torch.randint(-3, 4, (3, 2, 40), generator=g)
    b = torch.randint(-30, 31, (3, 2, 40), generator=g)
    h0 = torch.randint(-5, 6, (3, 2), generator=g)
    out = saturating_scan(a, b, h0, bits=bits)
    assert torch.equal(out, saturating_scan_ref(a, b, h0, bits=bits))
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    assert int(out.min()) == lo and int(out.max()) == hi  # this input saturates both ways


def test_saturation_is_not_associative():
    """Saturating at step 1 forgets what an exact scan would carry: (100 + 100) - 100 != 100 + (100 - 100)."""
    a = torch.ones(1, 3, dtype=torch.int64)
    b = torch.tensor([[100, 100, -100]])
    assert saturating_scan(a, b)[0, -1] == 27  # 127 - 100, not 100


def test_saturating_scan_bad_input():
    with pytest.raises(TypeError, match="a must be an integer tensor"):
        saturating_scan(torch.ones(2, 3), torch.ones(2, 3))
    with pytest.raises(ValueError, match="bits=1 is not allowed"):
        saturating_scan(torch.ones(2, 3, dtype=torch.int64), torch.ones(2, 3, dtype=torch.int64), bits=1)


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 13, 64, 100])
def test_stacked_levels_bracket_like_the_list_form(n):
    """prefix_scan_stacked (strided slices and one gather per level) gives the list form's bracketing, read off a
    combine on integer codes of the bracketed strings."""
    xs = [str(i) for i in range(n)]
    names: list[str] = list(xs)

    def code_combine(left, right):
        out = []
        for a, b in zip(left.tolist(), right.tolist()):
            names.append(f"({names[a]},{names[b]})")
            out.append(len(names) - 1)
        return torch.tensor(out)

    stacked = prefix_scan_stacked(code_combine, torch.arange(n))
    assert [names[i] for i in stacked.tolist()] == prefix_scan(bracket, xs, exclusive=False)
    batched = prefix_scan(code_combine, torch.arange(n), identity="e", batched=True)
    assert batched[0] == "e" and [names[int(i)] for i in batched[1:]] == prefix_scan(bracket, xs)[1:]


def test_stacked_makes_one_call_per_level():
    calls = []

    def combine(a, b):
        calls.append(len(a))
        return a + b

    prefix_scan_stacked(combine, torch.ones(100))
    assert len(calls) <= 2 * (100).bit_length() and sum(calls) < 2 * 100  # the list form makes ~2n scalar calls
    with pytest.raises(ValueError, match="at least one chunk state"):
        prefix_scan_stacked(combine, torch.ones(0))


@pytest.mark.parametrize("shape", [(40,), (3, 2, 40), (5, 0), (300, 17)])
@pytest.mark.parametrize("bits", [4, 8, 32])
def test_saturating_scan_numba_and_torch_match_the_reference(shape, bits):
    g = torch.Generator().manual_seed(bits)
    a = torch.randint(-3, 4, shape, generator=g, dtype=torch.int32)
    b = torch.randint(-(1 << (bits - 2)), 1 << (bits - 2), shape, generator=g)
    h0 = torch.randint(-5, 6, shape[:-1], generator=g)
    ref = saturating_scan_ref(a, b, h0, bits=bits)
    for backend in ("numba", "torch", "auto"):
        out = saturating_scan(a, b, h0, bits=bits, backend=backend)
        assert out.dtype == torch.int64 and torch.equal(out, ref), backend
    assert torch.equal(saturating_scan(a, b, bits=bits, backend="numba"), saturating_scan_ref(a, b, bits=bits))
    with pytest.raises(ValueError, match="backend='cuda' is not allowed"):
        saturating_scan(a, b, backend="cuda")
