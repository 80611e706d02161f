"""kernels.delta_rule: the chunked WY form and the recurrent path equal the sequential reference, with a scalar gate
per token and with a diagonal gate per substep; the reference against an explicit product of the transitions;
gradients in float64; half precision within stated tolerances; the decode step equals the parallel form after a
prefill."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from kernels.delta_rule import delta_rule, delta_rule_ref, delta_rule_step


def _inputs(nh=1, b=2, h=2, L=19, dk=6, dv=5, dtype=torch.float64, gate=True, seed=0):
    """Random inputs; ``gate``: True (a scalar per token), "diagonal" (one per substep and key channel) or False."""
    g = torch.Generator().manual_seed(seed)
    sub = (b, h, L, nh) if nh > 1 else (b, h, L)
    q = torch.randn(b, h, L, dk, generator=g, dtype=dtype)
    k = F.normalize(torch.randn(*sub, dk, generator=g, dtype=torch.float64), dim=-1).to(dtype)
    v = torch.randn(*sub, dv, generator=g, dtype=dtype)
    beta = (torch.rand(*sub, generator=g, dtype=torch.float64) * 2).to(dtype)  # up to 2: negative eigenvalues
    shape = (*sub, dk) if gate == "diagonal" else (b, h, L)
    lg = (-torch.rand(*shape, generator=g, dtype=torch.float64) * 0.3).to(dtype) if gate else None
    S0 = torch.randn(b, h, dv, dk, generator=g, dtype=dtype)
    return q, k, v, beta, lg, S0


@pytest.mark.parametrize("nh", [1, 2, 3])
@pytest.mark.parametrize("gate", [True, "diagonal", False])
@pytest.mark.parametrize("chunk", [1, 4, 64])
def test_chunked_and_recurrent_equal_the_reference(nh, gate, chunk):
    q, k, v, beta, lg, S0 = _inputs(nh, gate=gate)
    kw = dict(gate=lg, initial_state=S0, num_householder=nh, output_final_state=True)
    o_ref, s_ref = delta_rule_ref(q, k, v, beta, **kw)
    for mode in ("chunked", "recurrent"):
        o, s = delta_rule(q, k, v, beta, chunk_size=chunk, mode=mode, **kw)
        torch.testing.assert_close(o, o_ref, rtol=1e-10, atol=1e-10)
        torch.testing.assert_close(s, s_ref, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("nh", [1, 2])
def test_the_reference_is_the_product_of_diagonal_plus_rank_one_transitions(nh):
    """With a diagonal gate per substep, S_t = S_{t-1} Π_j diag(α_tj) (I - β_tj k_tj k_tjᵀ) + (inputs): written
    here as explicit matrices (the transition of substep j is diag(α) - β (α ⊙ k) kᵀ)."""
    q, k, v, beta, lg, S0 = _inputs(nh, L=6, gate="diagonal")
    if nh == 1:
        k, v, beta, lg = k[:, :, :, None], v[:, :, :, None], beta[..., None], lg[:, :, :, None]
    S = S0.clone()
    outs = []
    for t in range(k.shape[2]):
        for j in range(nh):
            a, kj, bj = torch.exp(lg[:, :, t, j]), k[:, :, t, j], beta[:, :, t, j][..., None, None]
            A = torch.diag_embed(a) - bj * (a * kj)[..., :, None] * kj[..., None, :]
            S = S @ A + bj * v[:, :, t, j][..., :, None] * kj[..., None, :]
        outs.append((S @ q[:, :, t, :, None])[..., 0])
    squeeze = (lambda x: x[:, :, :, 0]) if nh == 1 else (lambda x: x)
    o, s = delta_rule_ref(q, squeeze(k), squeeze(v), beta[..., 0] if nh == 1 else beta, gate=squeeze(lg),
                          initial_state=S0, num_householder=nh, output_final_state=True)
    torch.testing.assert_close(o, torch.stack(outs, dim=2))
    torch.testing.assert_close(s, S)


def test_a_uniform_diagonal_on_the_first_substep_is_the_scalar_gate():
    """The old scalar gate is the diagonal gate with equal channels on the first substep and none on the others."""
    q, k, v, beta, lg, S0 = _inputs(2)
    diag = torch.zeros(*k.shape, dtype=torch.float64)
    diag[:, :, :, 0] = lg[..., None]
    kw = dict(initial_state=S0, num_householder=2, chunk_size=4)
    torch.testing.assert_close(delta_rule(q, k, v, beta, gate=diag, **kw), delta_rule(q, k, v, beta, gate=lg, **kw))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_strong_diagonal_decays_take_the_exact_form(dtype):
    """Log decays of -4 per substep sum past the factored form's range within a chunk of 16 tokens: the chunk takes
    the exact ratio form and stays finite and equal to the reference."""
    q, k, v, beta, lg, S0 = _inputs(2, L=40, gate="diagonal")
    lg = lg * 13.0 - 0.1  # down to about -4 per substep
    kw = dict(gate=lg, initial_state=S0, num_householder=2, output_final_state=True)
    o_ref, s_ref = delta_rule_ref(q, k, v, beta, **kw)
    args = [t.to(dtype) for t in (q, k, v, beta)]
    kw = dict(gate=lg.to(dtype), initial_state=S0.to(dtype), num_householder=2, output_final_state=True)
    o, s = delta_rule(*args, chunk_size=16, **kw)
    tol = 1e-10 if dtype == torch.float64 else 1e-4
    torch.testing.assert_close(o.double(), o_ref, rtol=tol, atol=tol)
    torch.testing.assert_close(s.double(), s_ref, rtol=tol, atol=tol)


def test_a_reference_step_is_the_householder_update():
    """One token, no gate, beta = 1 and a unit key: S k becomes v exactly (the delta rule's write)."""
    q, k, v, beta, _, S0 = _inputs(L=1)
    beta = torch.ones_like(beta)
    _, S = delta_rule_ref(q, k, v, beta, initial_state=S0, output_final_state=True)
    torch.testing.assert_close(torch.einsum("bhvk,bhk->bhv", S, k[:, :, 0]), v[:, :, 0])


@pytest.mark.parametrize("nh", [1, 2])
@pytest.mark.parametrize("gate", [True, "diagonal"])
def test_gradcheck_float64(nh, gate):
    q, k, v, beta, lg, S0 = _inputs(nh, b=1, h=1, L=5, dk=3, dv=2, gate=gate)
    args = [t.clone().requires_grad_() for t in (q, k, v, beta, lg, S0)]

    def f(q, k, v, beta, lg, S0):
        return delta_rule(q, k, v, beta, gate=lg, initial_state=S0, num_householder=nh, chunk_size=2,
                          output_final_state=True)

    assert torch.autograd.gradcheck(f, args)


@pytest.mark.parametrize(("dtype", "tol"), [(torch.float32, 1e-4), (torch.bfloat16, 0.1), (torch.float16, 2e-2)])
def test_half_precision_computes_in_float32(dtype, tol):
    q, k, v, beta, lg, S0 = _inputs(2, dtype=torch.float64)
    ref = delta_rule_ref(q, k, v, beta, gate=lg, initial_state=S0, num_householder=2)
    args = [t.to(dtype) for t in (q, k, v, beta, lg, S0)]
    out = delta_rule(*args[:4], gate=args[4], initial_state=args[5], num_householder=2, chunk_size=8)
    assert out.dtype == dtype
    err = (out.double() - ref).abs().max() / ref.abs().max()
    assert err < tol


@pytest.mark.parametrize("gate", [True, "diagonal"])
def test_step_equals_parallel_after_a_prefill(gate):
    q, k, v, beta, lg, S0 = _inputs(2, L=16, gate=gate)
    o_all = delta_rule(q, k, v, beta, gate=lg, initial_state=S0, num_householder=2)
    _, S = delta_rule(q[:, :, :9], k[:, :, :9], v[:, :, :9], beta[:, :, :9], gate=lg[:, :, :9], initial_state=S0,
                      num_householder=2, output_final_state=True)
    for t in range(9, 16):
        o_t, S = delta_rule_step(S, q[:, :, t], k[:, :, t], v[:, :, t], beta[:, :, t], lg[:, :, t])
        torch.testing.assert_close(o_t, o_all[:, :, t])


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        (dict(num_householder=0), "num_householder=0 is not allowed"),
        (dict(chunk_size=0), "chunk_size=0 is not allowed"),
        (dict(mode="fast"), "mode='fast' is not allowed"),
        (dict(backend="numba"), "backend='numba' is not allowed for delta_rule"),
        (dict(gate=torch.zeros(2, 2, 3)), "gate has shape (2, 2, 3)"),
        (dict(gate=torch.zeros(2, 2, 19, 5)), "gate has shape (2, 2, 19, 5)"),
        (dict(initial_state=torch.zeros(2, 2, 6, 5)), "initial_state has shape (2, 2, 6, 5)"),
    ],
)
def test_bad_input_names_the_argument(change, fragment):
    q, k, v, beta, _, _ = _inputs(dtype=torch.float32)
    kw = dict(gate=None, initial_state=None) | change
    with pytest.raises(ValueError) as info:
        delta_rule(q, k, v, beta, **kw)
    assert fragment in str(info.value)


def test_integer_input_is_refused():
    q, k, v, beta, _, _ = _inputs(dtype=torch.float32)
    with pytest.raises(TypeError, match="q has dtype torch.int64"):
        delta_rule(q.long(), k, v, beta)


@pytest.mark.parametrize("nh", [1, 2])
@pytest.mark.parametrize("chunk", [3, 8])
@pytest.mark.parametrize("gate", [True, "diagonal"])
def test_packed_sequences_equal_separate_runs(nh, chunk, gate):
    q, k, v, beta, lg, S0 = _inputs(nh, b=1, L=17, gate=gate)
    cuts = [0, 6, 7, 17]
    seq_idx = torch.tensor([[i for i in range(3) for _ in range(cuts[i + 1] - cuts[i])]])
    kw = dict(gate=lg, initial_state=S0, num_householder=nh, output_final_state=True, seq_idx=seq_idx)
    o_ref, s_ref = delta_rule_ref(q, k, v, beta, **kw)
    for mode in ("chunked", "recurrent"):
        o, s = delta_rule(q, k, v, beta, chunk_size=chunk, mode=mode, **kw)
        torch.testing.assert_close(o, o_ref, rtol=1e-10, atol=1e-10)
        torch.testing.assert_close(s, s_ref, rtol=1e-10, atol=1e-10)
    for i in range(3):
        part = slice(cuts[i], cuts[i + 1])
        alone, last = delta_rule_ref(q[:, :, part], k[:, :, part], v[:, :, part], beta[:, :, part],
                                     gate=lg[:, :, part], initial_state=S0 if i == 0 else None, num_householder=nh,
                                     output_final_state=True)
        torch.testing.assert_close(o_ref[:, :, part], alone)
    torch.testing.assert_close(s_ref, last)
