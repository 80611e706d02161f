"""The delta rule, gated and with several Householder substeps per token (DeltaNet, Gated DeltaNet, DeltaProduct).

Per head the state is a matrix ``S`` of shape ``(d_v, d_k)``. For every token ``t``::

    for j in 1..n_h:  S <- S diag(alpha_tj)                   (gate: alpha = exp(g), g <= 0, kept in log space)
                      S <- S (I - beta_tj k_tj k_tj^T) + beta_tj v_tj k_tj^T
    o_t = S q_t

so substep ``j``'s transition is ``diag(alpha_tj) (I - beta_tj k_tj k_tj^T)``: a diagonal plus a rank-one part. The
gate is either a scalar per head and token (``gate (batch, heads, length)``: ``alpha_t0 = exp(g_t) I`` on the first
substep, the identity on the others: Gated DeltaNet's gate) or a diagonal per substep (``gate (batch, heads, length,
n_h, d_k)``, one log decay per key channel: Kimi Delta Attention's per-channel gate, one per Householder factor).

Keys are L2-normalised by the caller; ``beta`` in [0, 2] (beta > 1 gives the transition a negative eigenvalue, the
DeltaProduct / "negative eigenvalues" state-tracking trick). Three paths compute it:

* :func:`delta_rule_ref`: the sequential recurrence, token by token and substep by substep (readable, the reference).
* ``mode="chunked"`` (the default of :func:`delta_rule`): the WY / UT form. Inside a chunk the state updates are
  written ``S_r = G_r S_0 + sum_{i<=r} (G_r / G_i) u_i k_i^T`` with cumulative decays ``G``; the pseudo-values ``u``
  solve one unit lower-triangular system ``(I + A) U = diag(beta) (V - diag(G) K S_0^T)`` with
  ``A_ri = beta_r (G_r / G_i) k_r . k_i`` (i < r), and the outputs are a masked matmul. Only chunk-end states cross
  chunks. The ``n_h`` substeps of a token are interleaved as ``n_h`` positions of the sequence (the gate on the first,
  the query read after the last), as DeltaProduct does.
* ``mode="recurrent"``: :func:`delta_rule_step` in a loop (the decode path).

All paths are torch ops, so autograd is free; half-precision inputs are computed in float32 and returned in their
own dtype.
"""

from __future__ import annotations

import torch

from ._common import check_backend

__all__ = ["delta_rule", "delta_rule_ref", "delta_rule_step"]

FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
MODES = ("chunked", "recurrent")
#: a chunk's diagonal gate is factored (G_r / G_i = G_r * G_i^-1, two matmuls) while every |log G| in it stays below
#: this (e^60 ~ 1e26: far from float32's overflow at e^88); beyond, the exact (C, C, d_k) form of the ratios
FACTOR_LOG_RANGE = 60.0


def _work_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def _check(q, k, v, beta, gate, initial_state, num_householder):
    """Validate shapes and dtypes; return k, v, beta, gate with an explicit substep axis (a diagonal gate) and the
    sizes."""
    for name, t in {"q": q, "k": k, "v": v, "beta": beta, "gate": gate, "initial_state": initial_state}.items():
        if t is None:
            continue
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dtype not in FLOAT_DTYPES:
            raise TypeError(f"{name} has dtype {t.dtype}; allowed: float16, bfloat16, float32, float64")
        if t.device != q.device:
            raise ValueError(f"{name} is on {t.device} but q is on {q.device}")
    if not isinstance(num_householder, int) or isinstance(num_householder, bool) or num_householder < 1:
        raise ValueError(f"num_householder={num_householder!r} is not allowed; allowed: an integer >= 1")
    if q.dim() != 4:
        raise ValueError(f"q must be (batch, heads, length, d_k); got shape {tuple(q.shape)}")
    bsz, heads, length, d_k = q.shape
    nh = num_householder
    given = None if gate is None else tuple(gate.shape)
    if nh == 1 and k.dim() == 4:
        k, v, beta = k[:, :, :, None], v[:, :, :, None], beta[..., None]
        if gate is not None and gate.dim() == 4:
            gate = gate[:, :, :, None]
    if k.dim() != 5 or tuple(k.shape) != (bsz, heads, length, nh, d_k):
        raise ValueError(f"k has shape {tuple(k.shape)}; (batch, heads, length{', n_h' if nh > 1 else ''}, d_k) = "
                         f"{(bsz, heads, length) + ((nh,) if nh > 1 else ()) + (d_k,)} is required")
    if v.dim() != 5 or tuple(v.shape[:4]) != (bsz, heads, length, nh):
        raise ValueError(f"v has shape {tuple(v.shape)}; (batch, heads, length{', n_h' if nh > 1 else ''}, d_v) "
                         "is required")
    d_v = v.shape[-1]
    if tuple(beta.shape) != (bsz, heads, length, nh):
        raise ValueError(f"beta has shape {tuple(beta.shape)}; (batch, heads, length{', n_h' if nh > 1 else ''}) "
                         "is required")
    if gate is not None and tuple(gate.shape) not in ((bsz, heads, length), (bsz, heads, length, nh, d_k)):
        raise ValueError(f"gate has shape {given}; (batch, heads, length) = {(bsz, heads, length)} (a "
                         f"scalar per token) or (batch, heads, length{', n_h' if nh > 1 else ''}, d_k) = "
                         f"{(bsz, heads, length) + ((nh,) if nh > 1 else ()) + (d_k,)} (a diagonal per substep) "
                         "is required")
    if initial_state is not None and tuple(initial_state.shape) != (bsz, heads, d_v, d_k):
        raise ValueError(f"initial_state has shape {tuple(initial_state.shape)}; (batch, heads, d_v, d_k) = "
                         f"{(bsz, heads, d_v, d_k)} is required")
    return k, v, beta, gate, (bsz, heads, length, nh, d_k, d_v)


def _decay(S, g):
    """``S diag(exp(g))`` for a diagonal log gate ``g (..., d_k)``: the key axis (columns) of ``S (..., d_v, d_k)``
    scaled."""
    return S * torch.exp(g)[..., None, :]


def delta_rule_step(state, q, k, v, beta, gate=None):
    """One token of the delta rule: the decode step.

    Arguments:
        state: ``(batch, heads, d_v, d_k)``.
        q: ``(batch, heads, d_k)``.
        k: ``(batch, heads, d_k)`` or ``(batch, heads, n_h, d_k)``; v: ``(batch, heads, d_v)`` or
            ``(batch, heads, n_h, d_v)``; beta: ``(batch, heads)`` or ``(batch, heads, n_h)``.
        gate: log decay, ``(batch, heads)`` (a scalar on the first substep) or a diagonal per substep
            ``(batch, heads, n_h, d_k)`` (``(batch, heads, d_k)`` when k has no substep axis), or None.

    Returns:
        ``(o, new_state)``: o ``(batch, heads, d_v)`` in q's dtype, new_state in the state's dtype.
    """
    out_dtype, state_dtype = q.dtype, state.dtype
    work = _work_dtype(torch.promote_types(q.dtype, state.dtype))
    if k.dim() == 3:
        k, v, beta = k[:, :, None], v[:, :, None], beta[..., None]
        gate = gate[:, :, None] if gate is not None and gate.dim() == 3 else gate
    if gate is not None and tuple(gate.shape) not in (tuple(k.shape[:2]), tuple(k.shape)):
        raise ValueError(f"gate has shape {tuple(gate.shape)}; (batch, heads) = {tuple(k.shape[:2])} or a diagonal "
                         "per substep shaped like k is required")
    S = state.to(work)
    diagonal = gate is not None and gate.dim() == 4
    if gate is not None and not diagonal:
        S = S * torch.exp(gate.to(work))[..., None, None]
    for j in range(k.shape[2]):
        if diagonal:
            S = _decay(S, gate[:, :, j].to(work))
        kj, vj, bj = k[:, :, j].to(work), v[:, :, j].to(work), beta[:, :, j].to(work)
        err = torch.einsum("bhvk,bhk->bhv", S, kj) - vj  # (batch, heads, d_v): what S predicts for k, minus v
        S = S - bj[..., None, None] * err[..., :, None] * kj[..., None, :]
    o = torch.einsum("bhvk,bhk->bhv", S, q.to(work))
    return o.to(out_dtype), S.to(state_dtype)


def delta_rule_ref(q, k, v, beta, *, gate=None, initial_state=None, num_householder=1, output_final_state=False,
                   seq_idx=None):
    """The sequential recurrence (see the module docstring); same arguments and returns as :func:`delta_rule`."""
    k, v, beta, gate, (bsz, heads, length, nh, d_k, d_v) = _check(q, k, v, beta, gate, initial_state,
                                                                   num_householder)
    _check_seq_idx(seq_idx, bsz, length)
    work = _work_dtype(q.dtype)
    S = (torch.zeros(bsz, heads, d_v, d_k, dtype=work, device=q.device) if initial_state is None
         else initial_state.to(work))
    diagonal = gate is not None and gate.dim() == 5
    outs = []
    for t in range(length):
        if seq_idx is not None and t > 0:
            S = S * (seq_idx[:, t] == seq_idx[:, t - 1]).to(work)[:, None, None, None]
        if gate is not None and not diagonal:
            S = S * torch.exp(gate[:, :, t].to(work))[..., None, None]
        for j in range(nh):
            if diagonal:
                S = _decay(S, gate[:, :, t, j].to(work))
            kj, vj, bj = k[:, :, t, j].to(work), v[:, :, t, j].to(work), beta[:, :, t, j].to(work)
            S = S @ (torch.eye(d_k, dtype=work, device=q.device) - bj[..., None, None] * kj[..., :, None]
                     * kj[..., None, :]) + bj[..., None, None] * vj[..., :, None] * kj[..., None, :]
        outs.append(S @ q[:, :, t].to(work)[..., None])
    o = torch.stack(outs, dim=2)[..., 0].to(q.dtype) if length else q.new_zeros(bsz, heads, 0, d_v)
    return (o, S.to(q.dtype)) if output_final_state else o


def _check_seq_idx(seq_idx, bsz, length):
    if seq_idx is not None and (not isinstance(seq_idx, torch.Tensor) or seq_idx.dtype.is_floating_point
                                or tuple(seq_idx.shape) != (bsz, length)):
        raise ValueError(f"seq_idx must be an integer tensor of shape {(bsz, length)}; got "
                         f"{getattr(seq_idx, 'shape', seq_idx)}")


def _chunk(q, k, v, beta, g, S0, last, seq=None, ran_in=None):
    """One chunk of the WY form over ``C`` interleaved positions.

    Arguments:
        q, k: ``(b, h, C, d_k)``; v: ``(b, h, C, d_v)``; beta: ``(b, h, C)``; g: log decay at each position, a
            scalar ``(b, h, C)`` or a diagonal ``(b, h, C, d_k)``;
        S0: ``(b, h, d_v, d_k)``; last: ``(C,)`` bool, positions whose output is read.
        seq: ``(b, C)`` packed-sequence index of each position, or None; ran_in: ``(b,)`` the sequence whose state
            enters the chunk.
    Returns:
        outputs at the ``last`` positions ``(b, h, n_last, d_v)`` and the chunk-end state.
    """
    C = q.shape[2]
    gamma = torch.cumsum(g, dim=2)  # cumulative log decay, (b, h, C) or (b, h, C, d_k)
    causal = torch.ones(C, C, dtype=torch.bool, device=q.device).tril()
    strict = causal.clone().fill_diagonal_(False)
    ql = q[:, :, last]
    if g.dim() == 4 and float(gamma.detach().abs().amax()) <= FACTOR_LOG_RANGE:  # a diagonal, factored: G_r / G_i per
        G = torch.exp(gamma)                                             # channel as G_r * (1 / G_i)
        k_inv = (k * torch.exp(-gamma)).transpose(-1, -2)
        kk = (k * G) @ k_inv  # k_r . (G_r / G_i) k_i; above the diagonal (i > r) masked below
        qk = ((ql * G[:, :, last]) @ k_inv).masked_fill(~causal[last], 0.0)
        k_in, q_in = k * G, ql * G[:, :, last]
        k_tail = k * torch.exp(gamma[:, :, -1:] - gamma)
        G_end = G[:, :, -1, None, :]
    elif g.dim() == 4:  # a diagonal with strong decays: G_r / G_i per key channel, (b, h, C, C, d_k), 0 for i > r
        diff = gamma[:, :, :, None] - gamma[:, :, None]
        decay = torch.exp(diff.masked_fill(~causal[..., None], float("-inf")))
        kk = torch.einsum("bhrc,bhric,bhic->bhri", k, decay, k)  # k_r . (G_r / G_i) k_i
        qk = torch.einsum("bhrc,bhric,bhic->bhri", ql, decay[:, :, last], k)
        G = torch.exp(gamma)
        k_in, q_in = k * G, ql * G[:, :, last]  # G_r k_r: the entering state's decay to position r
        k_tail = k * torch.exp(gamma[:, :, -1:] - gamma)  # (G_C / G_i) k_i
        G_end = G[:, :, -1, None, :]  # (b, h, 1, d_k): the key axis of S
    else:
        diff = gamma[..., :, None] - gamma[..., None, :]  # log(G_r / G_i)
        decay = torch.exp(diff.masked_fill(~causal, float("-inf")))  # (b, h, C, C): G_r / G_i for i <= r, else 0
        kk = (k @ k.transpose(-1, -2)) * decay
        qk = (ql @ k.transpose(-1, -2)) * decay[:, :, last]  # (b, h, n_last, C)
        G = torch.exp(gamma)[..., None]
        k_in, q_in = k * G, ql * G[:, :, last]
        k_tail = k * torch.exp(gamma[..., -1:] - gamma)[..., None]
        G_end = G[:, :, -1, None]  # (b, h, 1, 1)
    if seq is not None:  # no position sees another sequence; the entering state only its own
        same = (seq[:, :, None] == seq[:, None, :]).to(q.dtype)[:, None]  # (b, 1, C, C)
        kk, qk = kk * same, qk * same[:, :, last]
        into = (seq == ran_in[:, None]).to(q.dtype)[:, None, :, None]  # (b, 1, C, 1)
        k_in, q_in = k_in * into, q_in * into[:, :, last]
        k_tail = k_tail * (seq == seq[:, -1:]).to(q.dtype)[:, None, :, None]
        G_end = G_end * (seq[:, -1] == ran_in).to(q.dtype)[:, None, None, None]
    A = (beta[..., :, None] * kk).masked_fill(~strict, 0.0)
    rhs = beta[..., None] * (v - k_in @ S0.transpose(-1, -2))  # (b, h, C, d_v)
    eye = torch.eye(C, dtype=q.dtype, device=q.device)
    U = torch.linalg.solve_triangular(eye + A, rhs, upper=False, unitriangular=True)  # (b, h, C, d_v)
    o = q_in @ S0.transpose(-1, -2) + qk @ U
    S_end = G_end * S0 + U.transpose(-1, -2) @ k_tail
    return o, S_end


def delta_rule(q, k, v, beta, *, gate=None, initial_state=None, num_householder=1, output_final_state=False,
               seq_idx=None, chunk_size=64, mode="chunked", backend="auto"):
    """The gated delta rule with ``num_householder`` substeps per token, equal to :func:`delta_rule_ref`.

    Arguments:
        q: ``(batch, heads, length, d_k)``.
        k: ``(batch, heads, length, n_h, d_k)``; v: ``(batch, heads, length, n_h, d_v)``; beta:
            ``(batch, heads, length, n_h)``; the ``n_h`` axis is omitted when ``num_householder=1``.
        gate: log alpha (<= 0): ``(batch, heads, length)``, a scalar per token applied before the first substep, or
            ``(batch, heads, length, n_h, d_k)``, a diagonal per substep (the ``n_h`` axis omitted when
            ``num_householder=1``), or None (no decay).
        initial_state: ``(batch, heads, d_v, d_k)`` or None (zeros).
        num_householder: substeps n_h per token.
        output_final_state: also return the final state.
        seq_idx: ``(batch, length)`` integer index of packed sequences (non-decreasing), or None: the state resets
            to zero where it changes (the initial state belongs to the first sequence).
        chunk_size: tokens per chunk of the WY form.
        mode: ``chunked`` (WY form) or ``recurrent`` (:func:`delta_rule_step` in a loop).
        backend: ``auto`` or ``torch`` (the only backend so far).

    Returns:
        o ``(batch, heads, length, d_v)``, and the final state ``(batch, heads, d_v, d_k)`` if asked.
    """
    check_backend(backend)
    if backend not in ("auto", "torch"):
        raise ValueError(f"backend={backend!r} is not allowed for delta_rule; allowed: 'auto', 'torch'")
    if mode not in MODES:
        raise ValueError(f"mode={mode!r} is not allowed; allowed: {', '.join(map(repr, MODES))}")
    if not isinstance(chunk_size, int) or isinstance(chunk_size, bool) or chunk_size < 1:
        raise ValueError(f"chunk_size={chunk_size!r} is not allowed; allowed: an integer >= 1")
    k, v, beta, gate, (bsz, heads, length, nh, d_k, d_v) = _check(q, k, v, beta, gate, initial_state,
                                                                   num_householder)
    _check_seq_idx(seq_idx, bsz, length)
    work = _work_dtype(q.dtype)
    S = (torch.zeros(bsz, heads, d_v, d_k, dtype=work, device=q.device) if initial_state is None
         else initial_state.to(work))
    if mode == "recurrent":
        outs = []
        for t in range(length):
            if seq_idx is not None and t > 0:
                S = S * (seq_idx[:, t] == seq_idx[:, t - 1]).to(work)[:, None, None, None]
            o_t, S = delta_rule_step(S, q[:, :, t].to(work), k[:, :, t], v[:, :, t], beta[:, :, t],
                                     None if gate is None else gate[:, :, t])
            outs.append(o_t)
        o = torch.stack(outs, dim=2) if outs else q.new_zeros(bsz, heads, 0, d_v, dtype=work)
        o = o.to(q.dtype)
        return (o, S.to(q.dtype)) if output_final_state else o
    # interleave the substeps: position t * n_h + j; a scalar gate on j = 0, the query read after j = n_h - 1
    T = length * nh
    kf = k.to(work).reshape(bsz, heads, T, d_k)
    vf = v.to(work).reshape(bsz, heads, T, d_v)
    bf = beta.to(work).reshape(bsz, heads, T)
    if gate is not None and gate.dim() == 5:  # a diagonal per substep: one per interleaved position
        gf = gate.to(work).reshape(bsz, heads, T, d_k)
    else:
        gf = torch.zeros(bsz, heads, length, nh, dtype=work, device=q.device)
        if gate is not None:
            gf[..., 0] = gate.to(work)
        gf = gf.reshape(bsz, heads, T)
    qf = torch.zeros(bsz, heads, length, nh, d_k, dtype=work, device=q.device)
    qf[:, :, :, -1] = q.to(work)
    qf = qf.reshape(bsz, heads, T, d_k)
    seq = None if seq_idx is None else seq_idx.repeat_interleave(nh, dim=1)  # (batch, T)
    step = chunk_size * nh
    outs = []
    for start in range(0, T, step):
        stop = min(start + step, T)
        last = torch.zeros(stop - start, dtype=torch.bool, device=q.device)
        last[nh - 1:: nh] = True
        piece = None if seq is None else seq[:, start:stop]
        ran_in = None if seq is None else seq[:, max(start - 1, 0)]
        o, S = _chunk(qf[:, :, start:stop], kf[:, :, start:stop], vf[:, :, start:stop], bf[:, :, start:stop],
                      gf[:, :, start:stop], S, last, piece, ran_in)
        outs.append(o)
    o = torch.cat(outs, dim=2) if outs else q.new_zeros(bsz, heads, 0, d_v, dtype=work)
    o = o.to(q.dtype)
    return (o, S.to(q.dtype)) if output_final_state else o
