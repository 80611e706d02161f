"""Models built from the SSM layers (lab.core.models): classifier and language-model shapes, decoding by steps
equal to the parallel form, per-layer state sizes."""

import pytest
import torch

from lab.core.models import CausalLM, SequenceClassifier, SSMStack, state_sizes

KINDS = ["lru", "s5", "mamba", "mamba2"]


def _by_steps(model, inputs):
    """The model's outputs read one step at a time from its initial state, stacked over time."""
    state = model.initial_state(inputs.shape[0])
    outs = []
    for t in range(inputs.shape[1]):
        out, state = model.step(inputs[:, t], state)
        outs.append(out)
    return torch.stack(outs, 1)


@pytest.mark.parametrize("kind", KINDS)
def test_sequence_classifier_shapes(kind):
    torch.manual_seed(5)
    extra = {"chunk_size": 8} if kind == "mamba2" else None
    model = SequenceClassifier(2, 7, kind=kind, d_model=16, n_layers=2, d_state=[8, 4], mixer_kwargs=extra)
    assert model(torch.randn(5, 21, 2)).shape == (5, 7)
    tok = SequenceClassifier(1, 4, kind=kind, d_model=16, n_layers=1, d_state=8, vocab_size=11, pooling="last",
                             mixer_kwargs=extra)
    assert tok(torch.randint(0, 11, (3, 9))).shape == (3, 4)
    with pytest.raises(ValueError, match="pooling"):
        SequenceClassifier(1, 2, pooling="max")
    with pytest.raises(ValueError, match="unknown SSM kind"):
        SequenceClassifier(1, 2, kind="rnn")


@pytest.mark.parametrize("kind", KINDS)
def test_causal_lm_decodes_like_its_parallel_form(kind):
    torch.manual_seed(6)
    extra = {"chunk_size": 4} if kind == "mamba2" else None
    lm = CausalLM(13, kind=kind, d_model=16, n_layers=2, d_state=8, mixer_kwargs=extra).double()
    tokens = torch.randint(0, 13, (2, 10))
    logits = lm(tokens)
    assert logits.shape == (2, 10, 13)
    torch.testing.assert_close(_by_steps(lm, tokens), logits, rtol=1e-9, atol=1e-9)
    gen = lm.generate(tokens[:, :4], 6)
    assert gen.shape == (2, 10) and torch.equal(gen[:, :4], tokens[:, :4])
    # greedy decoding: each generated token is the argmax of the parallel form's logits on the sequence so far
    torch.testing.assert_close(lm(gen)[:, 3:-1].argmax(-1), gen[:, 4:])


@pytest.mark.parametrize("kind", KINDS)
def test_stack_steps_equal_its_parallel_form(kind):
    torch.manual_seed(7)
    extra = {"chunk_size": 4} if kind == "mamba2" else None
    stack = SSMStack(kind, 16, 2, [8, 4], mixer_kwargs=extra).double()
    x = torch.randn(3, 9, 16, dtype=torch.float64)
    y, last = stack(x, return_state=True)
    torch.testing.assert_close(_by_steps(stack, x), y, rtol=1e-9, atol=1e-9)
    # the parallel form resumes from the state it returned
    more = torch.randn(3, 5, 16, dtype=torch.float64)
    torch.testing.assert_close(stack(more, state=last), stack(torch.cat([x, more], 1))[:, 9:], rtol=1e-9, atol=1e-9)


def test_state_sizes_per_layer_and_mismatch_rejected():
    model = SequenceClassifier(2, 3, kind="lru", d_model=8, n_layers=3, d_state=[5, 2, 7])
    assert state_sizes(model) == [5, 2, 7]
    assert state_sizes(SequenceClassifier(2, 3, kind="mamba", d_model=8, n_layers=2, d_state=4)) == []
    with pytest.raises(ValueError, match="3 entries for 2 layers"):
        SSMStack("s5", 8, 2, [4, 4, 4])
