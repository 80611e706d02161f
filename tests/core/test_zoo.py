"""The model zoo: every kind's step form equals its parallel form, trains, is causal; state bytes, parameter matching,
the negative-eigenvalue variants' ranges, rotary positions and clear errors."""

import pytest
import torch

from lab.core import mixers, zoo
from lab.core.transformer import n_params, rotary


def _tokens(seed=0, batch=2, length=21, vocab=5):
    return torch.randint(0, vocab, (batch, length), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("kind", zoo.KINDS)
def test_every_kind_is_causal_and_trains(kind):
    torch.manual_seed(0)
    model = zoo.build(kind, 5, 3, d_model=16, n_layers=2)
    x = _tokens()
    y = model(x)
    assert y.shape == (2, 21, 3)
    x2 = x.clone()
    x2[:, 11:] = (x2[:, 11:] + 1) % 5
    with torch.no_grad():
        torch.testing.assert_close(model(x2)[:, :11], model(x)[:, :11])
    y.logsumexp(-1).mean().backward()
    grads = [p.grad for p in model.parameters() if p.requires_grad]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)
    assert sum(float(g.abs().sum()) for g in grads) > 0


@pytest.mark.parametrize("kind", zoo.RECURRENT_KINDS)
def test_step_form_equals_parallel_form(kind):
    torch.manual_seed(1)
    model = zoo.build(kind, 5, 3, d_model=16, n_layers=2).eval()
    x = _tokens(1)
    with torch.no_grad():
        y = model(x)
        state, outs = model.initial_state(2), []
        for t in range(x.shape[1]):
            out, state = model.step(x[:, t], state)
            outs.append(out)
    torch.testing.assert_close(torch.stack(outs, 1), y, atol=2e-5, rtol=1e-4)


def test_state_bytes_constant_for_recurrent_and_growing_for_attention():
    gru = zoo.build("gru", 5, 3, d_model=16)
    assert gru.state_bytes(10) == gru.state_bytes(1000) == 2 * 16 * 4  # two layers of 16 float32 units
    lstm = zoo.build("lstm", 5, 3, d_model=16)
    assert lstm.state_bytes(7) == 2 * 2 * 16 * 4  # h and c
    tf = zoo.build("transformer", 5, 3, d_model=16, n_layers=2)
    assert tf.state_bytes(100) == 2 * 2 * 16 * 100 * 4
    assert tf.state_bytes(200) == 2 * tf.state_bytes(100)
    with pytest.raises(TypeError, match="no fixed-size state"):
        tf.initial_state(1)


def test_psm_and_chaingpt_read_any_length_and_hold_sublinear_or_growing_state():
    torch.manual_seed(2)
    x = _tokens(2, length=40)
    for kind in ("psm", "chaingpt"):
        model = zoo.build(kind, 5, 3, d_model=16, n_layers=2).eval()
        with torch.no_grad():
            y = model(x)
            for n in (1, 5, 13, 16, 17, 33):  # a prefix of any length (PSM: padded to whole chunks) reads the same
                torch.testing.assert_close(model(x[:, :n]), y[:, :n], atol=1e-5, rtol=1e-4)
    psm = zoo.build("psm", 5, 3, d_model=16)
    with torch.no_grad():  # whole chunks: the zoo's model is the PSM itself
        torch.testing.assert_close(psm(x), psm.body(x))
    chunk_state = psm.body.rows * 16 * 4
    assert psm.state_bytes(4 * 8) == chunk_state + 4 * 16 * 4  # 8 chunks read: one counter block, the open chunk
    assert psm.state_bytes(4 * 7) == 3 * chunk_state + 4 * 16 * 4  # 7 = 0b111: three blocks
    chain = zoo.build("chaingpt", 5, 3, d_model=16, n_layers=2)
    assert chain.state_bytes(160) - chain.state_bytes(16) == 2 * 2 * 16 * 9 * 4  # nine more anchors per layer


def test_build_matched_comes_close_and_draws_no_random_numbers():
    budget = 12_000
    sizes = {}
    for kind in zoo.KINDS:
        torch.manual_seed(3)
        model = zoo.build_matched(kind, 6, 4, budget)
        torch.manual_seed(3)
        again = zoo.build(kind, 6, 4, d_model=model.d_model)
        for p, q in zip(model.parameters(), again.parameters()):
            torch.testing.assert_close(p, q, rtol=0, atol=0)
        sizes[kind] = n_params(model)
    assert all(abs(s - budget) / budget < 0.2 for s in sizes.values()), sizes


def test_negative_variants_reach_negative_eigenvalues():
    torch.manual_seed(0)
    x = torch.randn(4, 9, 16) * 5
    gla, gla_neg = mixers.GatedDiagonal(16), mixers.GatedDiagonal(16, negative=True)
    gla_neg.load_state_dict(gla.state_dict())
    assert gla._gates(x)[0].min() > 0
    assert gla_neg._gates(x)[0].min() < 0 and gla_neg._gates(x)[0].max() < 1
    dn, dn_neg = mixers.GatedDeltaNet(16), mixers.GatedDeltaNet(16, negative=True)
    dn_neg.load_state_dict(dn.state_dict())
    assert dn._project(x)[3].max() < 1 < dn_neg._project(x)[3].max() < 2


def test_rotary_scores_depend_on_offsets_only():
    torch.manual_seed(0)
    q, k = torch.randn(1, 1, 1, 8).expand(1, 1, 12, 8), torch.randn(1, 1, 1, 8).expand(1, 1, 12, 8)
    scores = rotary(q) @ rotary(k).transpose(-1, -2)  # (1, 1, 12, 12)
    torch.testing.assert_close(scores[0, 0, 5, 2], scores[0, 0, 9, 6])
    assert (scores[0, 0, 5, 2] - scores[0, 0, 5, 4]).abs() > 1e-4
    a = zoo.build("transformer", 5, 3, d_model=16)
    b = zoo.build("transformer_rope", 5, 3, d_model=16)
    b.load_state_dict(a.state_dict())
    x = _tokens(2)
    with torch.no_grad():
        assert (a(x) - b(x)).abs().max() > 1e-4


@pytest.mark.parametrize("call, field", [
    (lambda: zoo.build("rwkv", 5, 3), "kind"),
    (lambda: zoo.build("gru", 5, 3, d_model=10), "d_model"),
    (lambda: zoo.build_matched("gru", 5, 3, 0), "budget"),
    (lambda: mixers.RNN(8, "elman"), "cell"),
    (lambda: mixers.GatedDeltaNet(10, 3), "d_model"),
])
def test_bad_arguments_name_the_field(call, field):
    with pytest.raises(ValueError, match=field):
        call()
