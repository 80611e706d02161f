"""The NoPE transformer: causal masking, permutation equivariance without positions, shapes, the token tagger and
parameter counting."""

import pytest
import torch

from lab.core.models import SSMStack
from lab.core.transformer import Attention, Block, TokenTagger, Transformer, n_params


def _model(causal, seed=0, d=16, layers=2):
    torch.manual_seed(seed)
    return Transformer(d, layers, 4, causal=causal).eval()


def test_causal_transformer_never_looks_ahead():
    model = _model(True)
    x = torch.randn(3, 12, 16)
    y = model(x)
    x2 = x.clone()
    x2[:, 7:] = torch.randn(3, 5, 16)
    y2 = model(x2)
    torch.testing.assert_close(y2[:, :7], y[:, :7])
    assert (y2[:, 7:] - y[:, 7:]).abs().max() > 1e-3  # and later rows do change


def test_bidirectional_rows_see_the_future():
    model = _model(False)
    x = torch.randn(2, 6, 16)
    x2 = x.clone()
    x2[:, -1] = torch.randn(2, 16)
    assert (model(x2)[:, 0] - model(x)[:, 0]).abs().max() > 1e-4


def test_no_positions_bidirectional_is_permutation_equivariant():
    """Without positional encodings, permuting the rows permutes the output rows."""
    model = _model(False)
    x = torch.randn(2, 9, 16)
    perm = torch.randperm(9)
    torch.testing.assert_close(model(x[:, perm]), model(x)[:, perm], atol=1e-5, rtol=1e-5)


def test_causal_attention_matches_an_explicit_masked_softmax():
    torch.manual_seed(1)
    att = Attention(8, 2, causal=True).eval()
    x = torch.randn(1, 5, 8)
    q, k, v = att.qkv(x).chunk(3, dim=-1)
    out = []
    for h in range(2):
        sl = slice(4 * h, 4 * h + 4)
        scores = q[..., sl] @ k[..., sl].transpose(-1, -2) / 2.0  # sqrt(head dim 4)
        scores = scores.masked_fill(torch.ones(5, 5).triu(1).bool(), float("-inf"))
        out.append(scores.softmax(-1) @ v[..., sl])
    torch.testing.assert_close(att(x), att.out(torch.cat(out, -1)), atol=1e-6, rtol=1e-5)


def test_block_is_pre_norm_residual_and_shapes_hold():
    torch.manual_seed(2)
    block = Block(8, 2, causal=True)
    for p in (*block.attn.out.parameters(), *block.mlp[-1].parameters()):
        torch.nn.init.zeros_(p)
    x = torch.randn(2, 4, 8)
    torch.testing.assert_close(block(x), x)  # zero residual branches: the identity
    assert _model(True)(torch.randn(4, 10, 16)).shape == (4, 10, 16)


def test_heads_must_divide_width():
    with pytest.raises(ValueError, match="d_model=10 is not allowed; allowed: a multiple of n_heads=4"):
        Attention(10, 4, causal=True)


def test_token_tagger_gives_per_position_logits_over_any_body():
    torch.manual_seed(3)
    for body in (Transformer(12, 1, 2, causal=True), SSMStack("lru", 12, 1, 8)):
        model = TokenTagger(7, 5, 12, body)
        logits = model(torch.randint(0, 7, (3, 11)))
        assert logits.shape == (3, 11, 5)


def test_n_params_counts_shared_tensors_once():
    lin = torch.nn.Linear(4, 3)
    assert n_params(lin) == 15
    seq = torch.nn.Sequential(lin, lin)
    assert n_params(seq) == 15
    lin.bias.requires_grad_(False)
    assert n_params(lin) == 12
    d, L = 16, 2  # per block: qkv 3d²+3d, out d²+d, MLP 8d²+5d, two norms 4d; final norm 2d
    assert n_params(Transformer(d, L, 2)) == L * (12 * d * d + 13 * d) + 2 * d
