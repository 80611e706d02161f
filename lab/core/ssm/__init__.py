r"""State space layers on the lab's scan kernels: LRU, S5, Mamba (selective) and Mamba-2 (SSD).

Every layer maps ``(batch, length, d_model) -> (batch, length, d_model)`` and has two forms that agree:

* ``forward(x, state=None, return_state=False)``: the parallel form; its recurrence runs in :mod:`kernels`
  (``linear_scan`` for LRU and S5, ``selective_scan`` for Mamba, ``ssd`` for Mamba-2), never a Python loop;
* ``step(x_t, state) -> (y_t, state)``: one step of the recurrence, ``x_t`` of shape ``(batch, d_model)``, for
  autoregressive decoding; ``initial_state(batch)`` gives the zero state.

**Linear time-invariant layers** (diagonal, complex): ``h_t = λ ⊙ h_{t-1} + B̄ x_t``, ``y_t = Re(C h_t) + D ⊙ x_t``.

* :class:`LRU` (Orvieto et al. 2023, "Resurrecting recurrent neural networks for long sequences"): exponential
  parametrisation ``λ = exp(-exp(ν_log) + i exp(θ_log))`` (so ``|λ| < 1`` always) and input normalisation
  ``B̄ = diag(γ) B`` with ``γ`` initialised to ``sqrt(1 - |λ|²)``.
* :class:`S5` (Smith et al. 2023, "Simplified state space layers for sequence modeling"): continuous-time
  ``Λ = -exp(Λ_re_log) + i Λ_im`` initialised from HiPPO-N, per-state step ``Δ``, zero-order hold
  ``λ̄ = exp(ΛΔ)``, ``B̄ = (λ̄ - 1)/Λ · B̃``; conjugate symmetry: the layer stores one state per conjugate pair and
  outputs ``2 Re(C̃ h)``.

In both, each stored complex state stands for a conjugate pair of the equivalent real system (LRU through ``Re``,
S5 through ``2 Re``), so removing a stored state removes the pair together. Both expose :meth:`system`, the
discretised ``(λ, B̄, C)`` in float64, and :meth:`select_states` / :meth:`set_system` to shrink the layer in place
(with its Adam moments), which the pruning and reduction methods build on.

**Selective layers.** :class:`Mamba` (Gu & Dao 2023) and :class:`Mamba2` (Dao & Gu 2024, SSD) blocks with their input
projection, causal depthwise convolution, gating and output projection.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

import kernels

__all__ = ["LRU", "S5", "Mamba", "Mamba2", "DiagonalSSM", "hippo_n_eigenvalues", "MIXERS", "make_mixer"]


def _complex(re: torch.Tensor, im: torch.Tensor) -> torch.Tensor:
    return torch.complex(re, im)


# ====================================================================================================================
# Diagonal linear time-invariant layers
# ====================================================================================================================
class DiagonalSSM(nn.Module):
    """Base of the diagonal complex LTI layers: parallel form on ``kernels.linear_scan``, step, shrinking.

    Subclasses define ``eigenvalues()`` ``(N,)``, ``input_matrix()`` (B̄, ``(N, H)``), ``output_matrix()``
    (the effective C, ``(H, N)``; the layer outputs ``Re(C h)``) and ``STATE_AXES``: the per-state parameters and the
    axis that indexes states in each.
    """

    STATE_AXES: dict[str, int] = {}
    #: parameters of the recurrence itself (eigenvalues, step sizes): trained with the SSM learning rate, no decay
    RECURRENT: tuple[str, ...] = ()

    d_model: int

    @property
    def d_state(self) -> int:
        return int(self.C_re.shape[1])

    def eigenvalues(self) -> torch.Tensor:
        raise NotImplementedError

    def input_matrix(self) -> torch.Tensor:
        raise NotImplementedError

    def output_matrix(self) -> torch.Tensor:
        raise NotImplementedError

    def _project_in(self, x: torch.Tensor) -> torch.Tensor:
        """``B̄ x`` for real ``x`` ``(..., H)`` -> complex ``(..., N)``, as one real matmul."""
        Bbar = self.input_matrix()  # (N, H)
        W = rearrange(torch.view_as_real(Bbar), "n h two -> h (n two)")  # (H, 2N): [Re, Im] per state
        out = x @ W  # (..., 2N)
        return torch.view_as_complex(out.unflatten(-1, (-1, 2)))

    def _project_out(self, h: torch.Tensor) -> torch.Tensor:
        """``Re(C h)`` for complex ``h`` ``(..., N)`` -> real ``(..., H)``, as one real matmul."""
        C = self.output_matrix()  # (H, N)
        W = rearrange(torch.stack([C.real, -C.imag], dim=-1), "h n two -> (n two) h")  # (2N, H)
        return torch.view_as_real(h).flatten(-2) @ W

    def forward(self, x: torch.Tensor, state: torch.Tensor | None = None, return_state: bool = False):
        """Parallel form.

        Arguments:
            x: ``(batch, length, d_model)`` real input.
            state: ``(batch, d_state)`` complex state before the first step, or None (zeros).
            return_state: also return the state after the last step.
        Returns:
            ``y`` ``(batch, length, d_model)``, and the final state ``(batch, d_state)`` if ``return_state``.
        """
        lam = self.eigenvalues()  # (N,)
        bu = self._project_in(x)  # (b, L, N) complex
        h = kernels.linear_scan(lam.reshape(1, 1, -1), bu, state, dim=1)  # (b, L, N)
        y = self._project_out(h) + self.D * x
        if return_state:
            return y, h[:, -1] if h.shape[1] else (state if state is not None else self.initial_state(x.shape[0]))
        return y

    def initial_state(self, batch: int) -> torch.Tensor:
        dtype = torch.complex128 if self.D.dtype == torch.float64 else torch.complex64
        return torch.zeros(batch, self.d_state, dtype=dtype, device=self.D.device)

    def step(self, x_t: torch.Tensor, state: torch.Tensor):
        """One step: ``x_t`` ``(batch, d_model)``, ``state`` ``(batch, d_state)`` -> ``(y_t, state)``."""
        h = self.eigenvalues() * state + self._project_in(x_t)
        return self._project_out(h) + self.D * x_t, h

    # ------------------------------------------------------------------------------------------------------------
    @torch.no_grad()
    def system(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The discretised system ``(λ (N,), B̄ (N, H), C (H, N))`` as complex128 NumPy arrays.

        The layer computes ``h_t = λ h_{t-1} + B̄ x_t``, ``y_t = Re(C h_t) + D x_t``.
        """
        return (
            self.eigenvalues().detach().cpu().numpy().astype(np.complex128),
            self.input_matrix().detach().cpu().numpy().astype(np.complex128),
            self.output_matrix().detach().cpu().numpy().astype(np.complex128),
        )

    def impulse_response(self, length: int) -> np.ndarray:
        """The layer's SSM kernel ``K_k = Re(C diag(λ)^k B̄)`` for k < ``length``: ``(length, H_out, H_in)``.

        (The skip ``D`` is not included.)
        """
        lam, Bbar, C = self.system()
        powers = lam[None, :] ** np.arange(length)[:, None]  # (L, N)
        return np.einsum("on,kn,ni->koi", C, powers, Bbar).real

    @torch.no_grad()
    def select_states(self, keep: Sequence[int] | torch.Tensor, optimizer: torch.optim.Optimizer | None = None):
        """Keep only the states ``keep`` (indices into the current states), in place; others are removed.

        Removes ``λ_i``, the row ``B̄_i`` and the column ``C_i`` of every other state. With ``optimizer``, the
        per-parameter optimiser state (Adam's moments) is cut the same way, so training continues consistently.
        """
        idx = torch.as_tensor(keep, dtype=torch.long, device=self.D.device).reshape(-1)
        if idx.numel() == 0:
            raise ValueError("keep is empty: a layer must keep at least one state")
        if int(idx.min()) < 0 or int(idx.max()) >= self.d_state or len(set(idx.tolist())) != idx.numel():
            raise ValueError(f"keep must be distinct indices in [0, {self.d_state}); got {idx.tolist()}")
        for name, axis in self.STATE_AXES.items():
            new = getattr(self, name).detach().index_select(axis, idx).clone()
            _resize_parameter(self, name, new, optimizer, lambda t, a=axis: t.index_select(a, idx).clone())
        return self


def _resize_parameter(module: nn.Module, name: str, new: torch.Tensor, optimizer, moment_map) -> None:
    """Replace parameter ``name`` of ``module`` by a new Parameter holding ``new`` (any shape).

    A fresh Parameter (not a resized ``.data``) keeps autograd's per-leaf bookkeeping consistent. With
    ``optimizer``, the new Parameter takes the old one's place in its param group, and the old per-parameter
    state moves to it with every non-scalar tensor (Adam's moments) mapped by ``moment_map``.
    """
    old = getattr(module, name)
    param = nn.Parameter(new, requires_grad=old.requires_grad)
    setattr(module, name, param)
    if optimizer is None:
        return
    for group in optimizer.param_groups:
        group["params"] = [param if q is old else q for q in group["params"]]
    if old in optimizer.state:
        st = optimizer.state.pop(old)
        optimizer.state[param] = {k: moment_map(v) if torch.is_tensor(v) and v.dim() > 0 else v
                                  for k, v in st.items()}


class LRU(DiagonalSSM):
    """Linear Recurrent Unit: complex diagonal recurrence with exponential parametrisation and γ normalisation.

    ``λ = exp(-exp(ν_log) + i exp(θ_log))``, ``B̄ = diag(γ) (B_re + i B_im)``, ``γ = exp(γ_log)``,
    ``y = Re((C_re + i C_im) h) + D ⊙ x``.

    Arguments:
        d_model: ``H``, input and output features.
        d_state: ``N``, complex states.
        r_min, r_max: ``|λ|`` is initialised uniformly on the ring ``r_min <= |λ| <= r_max`` (in area).
        max_phase: phases ``arg λ`` are initialised uniformly in ``[0, max_phase]``.
    """

    STATE_AXES = {"nu_log": 0, "theta_log": 0, "gamma_log": 0, "B_re": 0, "B_im": 0, "C_re": 1, "C_im": 1}
    RECURRENT = ("nu_log", "theta_log", "gamma_log")

    def __init__(self, d_model: int, d_state: int, *, r_min: float = 0.0, r_max: float = 0.99,
                 max_phase: float = 2 * math.pi):
        super().__init__()
        if not 0.0 <= r_min < r_max < 1.0:
            raise ValueError(f"need 0 <= r_min < r_max < 1; got r_min={r_min}, r_max={r_max}")
        self.d_model = d_model
        u1, u2 = torch.rand(d_state), torch.rand(d_state)
        nu = -0.5 * torch.log(u1 * (r_max**2 - r_min**2) + r_min**2)  # |λ| = exp(-ν)
        theta = (max_phase * u2).clamp_min(1e-4)
        self.nu_log = nn.Parameter(torch.log(nu))
        self.theta_log = nn.Parameter(torch.log(theta))
        self.gamma_log = nn.Parameter(0.5 * torch.log1p(-torch.exp(-2 * nu)))  # γ = sqrt(1 - |λ|²)
        self.B_re = nn.Parameter(torch.randn(d_state, d_model) / math.sqrt(2 * d_model))
        self.B_im = nn.Parameter(torch.randn(d_state, d_model) / math.sqrt(2 * d_model))
        self.C_re = nn.Parameter(torch.randn(d_model, d_state) / math.sqrt(d_state))
        self.C_im = nn.Parameter(torch.randn(d_model, d_state) / math.sqrt(d_state))
        self.D = nn.Parameter(torch.randn(d_model))

    def eigenvalues(self) -> torch.Tensor:
        return torch.exp(_complex(-torch.exp(self.nu_log), torch.exp(self.theta_log)))

    def input_matrix(self) -> torch.Tensor:
        return torch.exp(self.gamma_log)[:, None] * _complex(self.B_re, self.B_im)

    def output_matrix(self) -> torch.Tensor:
        return _complex(self.C_re, self.C_im)

    @torch.no_grad()
    def set_system(self, lam, Bbar, C, optimizer: torch.optim.Optimizer | None = None, source=None) -> LRU:
        """Replace the recurrence by the diagonal system ``(λ, B̄, C)`` (any state size), in place.

        The parameters are recovered exactly: ``ν_log = log(-log|λ|)``, ``θ_log = log(arg λ mod 2π)``,
        ``γ = sqrt(1 - |λ|²)`` (the LRU's normalisation) and ``B = B̄ / γ``.

        Arguments:
            lam: ``(r,)`` complex eigenvalues with ``|λ| < 1``.
            Bbar: ``(r, H)`` complex input matrix; C: ``(H, r)`` complex output matrix.
            optimizer: if given, its per-parameter state for this layer is resized: new state ``j`` inherits the
                moments of old state ``source[j]``.
            source: ``(r,)`` indices of the old states whose optimiser moments the new states take.
        """
        dev, dt = self.D.device, self.D.dtype
        lam = np.asarray(lam, dtype=np.complex128)
        mod = np.clip(np.abs(lam), 1e-30, 1.0 - 1e-7)  # strictly stable: ν > 0
        phase = np.mod(np.angle(lam), 2 * np.pi)
        phase = np.where(phase < 1e-7, 1e-7, phase)  # θ = exp(θ_log) > 0; a real λ gets a vanishing phase
        gamma = np.sqrt(1.0 - mod**2)
        Bn = np.asarray(Bbar, np.complex128) / gamma[:, None]
        C = np.asarray(C, np.complex128)
        values = {
            "nu_log": np.log(-np.log(mod)),
            "theta_log": np.log(phase),
            "gamma_log": np.log(gamma),
            "B_re": Bn.real, "B_im": Bn.imag, "C_re": C.real, "C_im": C.imag,
        }
        src = None if source is None else torch.as_tensor(source, dtype=torch.long, device=dev)
        for name, axis in self.STATE_AXES.items():
            new = torch.as_tensor(values[name], dtype=dt, device=dev).contiguous()
            if src is None:
                moment_map = lambda t, n=new: torch.zeros_like(n)  # noqa: E731
            else:
                moment_map = lambda t, a=axis: t.index_select(a, src).clone()  # noqa: E731
            _resize_parameter(self, name, new, optimizer, moment_map)
        return self


def hippo_n_eigenvalues(n: int) -> np.ndarray:
    """Eigenvalues of the normal part of the HiPPO-LegS matrix of size ``2n``, one per conjugate pair.

    ``A_LegS = N - P Pᵀ`` with ``P_k = sqrt(k + 1/2)``; the normal part ``N`` has eigenvalues ``-1/2 ± iω``. Returns
    the ``n`` with ``ω >= 0``, sorted by ``ω`` (S5's initialisation).
    """
    m = 2 * n
    k = np.arange(m)
    p = np.sqrt(k + 0.5)
    A = -np.tril(np.sqrt(2 * k[:, None] + 1) * np.sqrt(2 * k[None, :] + 1), -1) - np.diag(k + 1.0)
    normal = A + np.outer(p, p)
    ev = np.linalg.eigvals(normal)
    ev = ev[np.argsort(-ev.imag)][:n]  # one of each conjugate pair: the half with ω >= 0
    return ev[np.argsort(ev.imag)]


class S5(DiagonalSSM):
    """S5: MIMO diagonal SSM with HiPPO-N eigenvalues, per-state steps and zero-order-hold discretisation.

    ``Λ = -exp(Λ_re_log) + i Λ_im``, ``Δ = exp(log_Δ)``, ``λ̄ = exp(ΛΔ)``, ``B̄ = (λ̄ - 1)/Λ · B̃``,
    ``y = 2 Re(C̃ h) + D ⊙ x`` (one stored state per conjugate pair).

    Arguments:
        d_model: ``H``. d_state: complex states stored (the real system has twice as many).
        dt_min, dt_max: ``Δ`` is initialised log-uniformly in this range.
    """

    STATE_AXES = {"lambda_re_log": 0, "lambda_im": 0, "log_dt": 0, "B_re": 0, "B_im": 0, "C_re": 1, "C_im": 1}
    RECURRENT = ("lambda_re_log", "lambda_im", "log_dt")

    def __init__(self, d_model: int, d_state: int, *, dt_min: float = 1e-3, dt_max: float = 1e-1):
        super().__init__()
        if not 0 < dt_min <= dt_max:
            raise ValueError(f"need 0 < dt_min <= dt_max; got {dt_min}, {dt_max}")
        self.d_model = d_model
        ev = torch.as_tensor(hippo_n_eigenvalues(d_state))
        self.lambda_re_log = nn.Parameter(torch.log(-ev.real).float())
        self.lambda_im = nn.Parameter(ev.imag.float().clone())
        self.log_dt = nn.Parameter(torch.rand(d_state) * (math.log(dt_max) - math.log(dt_min)) + math.log(dt_min))
        self.B_re = nn.Parameter(torch.randn(d_state, d_model) / math.sqrt(2 * d_model))
        self.B_im = nn.Parameter(torch.randn(d_state, d_model) / math.sqrt(2 * d_model))
        self.C_re = nn.Parameter(torch.randn(d_model, d_state) / math.sqrt(2 * d_state))
        self.C_im = nn.Parameter(torch.randn(d_model, d_state) / math.sqrt(2 * d_state))
        self.D = nn.Parameter(torch.randn(d_model))

    def continuous_eigenvalues(self) -> torch.Tensor:
        return _complex(-torch.exp(self.lambda_re_log), self.lambda_im)

    def eigenvalues(self) -> torch.Tensor:
        lam_c = self.continuous_eigenvalues()
        return torch.exp(lam_c * torch.exp(self.log_dt))

    def input_matrix(self) -> torch.Tensor:
        lam_c = self.continuous_eigenvalues()
        zoh = (torch.exp(lam_c * torch.exp(self.log_dt)) - 1) / lam_c  # (N,)
        return zoh[:, None] * _complex(self.B_re, self.B_im)

    def output_matrix(self) -> torch.Tensor:
        return 2 * _complex(self.C_re, self.C_im)


# ====================================================================================================================
# Selective layers
# ====================================================================================================================
def _causal_conv(x: torch.Tensor, conv: nn.Conv1d, prefix: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """Depthwise causal convolution of ``x`` ``(b, c, L)`` after ``prefix`` ``(b, c, k-1)`` (zeros if None).

    Returns the output ``(b, c, L)`` and the last ``k - 1`` inputs (the next prefix).
    """
    k = conv.kernel_size[0]
    if prefix is None:
        prefix = x.new_zeros(x.shape[0], x.shape[1], k - 1)
    full = torch.cat([prefix, x], dim=-1)  # (b, c, k-1+L)
    y = F.conv1d(full, conv.weight, conv.bias, groups=conv.groups)
    return y, full[..., full.shape[-1] - (k - 1):]


def _conv_step(x_t: torch.Tensor, conv: nn.Conv1d, prefix: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One step of :func:`_causal_conv`: ``x_t`` ``(b, c)``, ``prefix`` ``(b, c, k-1)``."""
    window = torch.cat([prefix, x_t[..., None]], dim=-1)  # (b, c, k)
    y = (window * conv.weight[:, 0, :]).sum(-1) + conv.bias
    return y, window[..., 1:]


def _inverse_softplus(x: torch.Tensor) -> torch.Tensor:
    return x + torch.log(-torch.expm1(-x))


class Mamba(nn.Module):
    """Mamba (selective SSM) block: in-projection, causal conv, selective scan, SiLU gate, out-projection.

    ``dt, B, C`` depend on the input; per channel ``h_t = exp(Δ_t A) h_{t-1} + Δ_t B_t u_t``,
    ``y_t = (C_t · h_t + D u_t) · silu(z_t)``. The scan is ``kernels.selective_scan``.

    Arguments:
        d_model: features. d_state: ``N`` per channel. d_conv: causal conv width. expand: ``d_inner / d_model``.
        dt_rank: rank of the Δ projection (default ``ceil(d_model / 16)``).
        dt_min, dt_max: Δ initialised log-uniformly in this range (through the bias).
    """

    RECURRENT = ("A_log", "D")

    def __init__(self, d_model: int, d_state: int = 16, *, d_conv: int = 4, expand: int = 2,
                 dt_rank: int | None = None, dt_min: float = 1e-3, dt_max: float = 1e-1):
        super().__init__()
        self.d_model, self.d_state, self.d_conv = d_model, d_state, d_conv
        self.d_inner = expand * d_model
        self.dt_rank = dt_rank or math.ceil(d_model / 16)
        self.in_proj = nn.Linear(d_model, 2 * self.d_inner, bias=False)
        self.conv = nn.Conv1d(self.d_inner, self.d_inner, d_conv, groups=self.d_inner)
        self.x_proj = nn.Linear(self.d_inner, self.dt_rank + 2 * d_state, bias=False)
        self.dt_proj = nn.Linear(self.dt_rank, self.d_inner, bias=False)
        dt = torch.exp(torch.rand(self.d_inner) * (math.log(dt_max) - math.log(dt_min)) + math.log(dt_min))
        self.dt_bias = nn.Parameter(_inverse_softplus(dt))
        self.A_log = nn.Parameter(torch.log(torch.arange(1, d_state + 1, dtype=torch.float32)).repeat(
            self.d_inner, 1))  # (d_inner, N): S4D-real initialisation A = -(1..N)
        self.D = nn.Parameter(torch.ones(self.d_inner))
        self.out_proj = nn.Linear(self.d_inner, d_model, bias=False)

    def initial_state(self, batch: int):
        w = self.D
        return (w.new_zeros(batch, self.d_inner, self.d_conv - 1), w.new_zeros(batch, self.d_inner, self.d_state))

    def _dt_B_C(self, u: torch.Tensor):
        """From the conv output ``u`` ``(..., d_inner)``: raw Δ ``(..., d_inner)``, B and C ``(..., N)``."""
        dbc = self.x_proj(u)
        dt, B, C = torch.split(dbc, [self.dt_rank, self.d_state, self.d_state], dim=-1)
        return self.dt_proj(dt), B, C

    def forward(self, x: torch.Tensor, state=None, return_state: bool = False):
        """Parallel form. ``x`` ``(batch, length, d_model)``; ``state`` as from :meth:`initial_state` or None."""
        xz = rearrange(self.in_proj(x), "b l c -> b c l")
        u, z = xz.chunk(2, dim=1)  # (b, d_inner, L) each
        conv_prefix, h0 = (None, None) if state is None else state
        u, conv_next = _causal_conv(u, self.conv, conv_prefix)
        u = F.silu(u)
        dt, B, C = self._dt_B_C(rearrange(u, "b c l -> b l c"))
        A = -torch.exp(self.A_log)  # (d_inner, N)
        out = kernels.selective_scan(
            u, rearrange(dt, "b l c -> b c l"), A, rearrange(B, "b l n -> b n l").contiguous(),
            rearrange(C, "b l n -> b n l").contiguous(), self.D, z=z, delta_bias=self.dt_bias,
            delta_softplus=True, h0=h0, return_last_state=return_state,
        )
        y, h_last = out if return_state else (out, None)
        y = self.out_proj(rearrange(y, "b c l -> b l c"))
        return (y, (conv_next, h_last)) if return_state else y

    def step(self, x_t: torch.Tensor, state):
        """One step: ``x_t`` ``(batch, d_model)``; ``state = (conv prefix (b, d_inner, d_conv - 1),
        h (b, d_inner, N))``."""
        conv_prefix, h = state
        u, z = self.in_proj(x_t).chunk(2, dim=-1)  # (b, d_inner)
        u, conv_prefix = _conv_step(u, self.conv, conv_prefix)
        u = F.silu(u)
        dt, B, C = self._dt_B_C(u)
        dt = F.softplus(dt + self.dt_bias)  # (b, d_inner)
        A = -torch.exp(self.A_log)
        h = torch.exp(dt[..., None] * A) * h + (dt * u)[..., None] * B[:, None, :]  # (b, d_inner, N)
        y = (h * C[:, None, :]).sum(-1) + self.D * u
        y = y * F.silu(z)
        return self.out_proj(y), (conv_prefix, h)


class Mamba2(nn.Module):
    """Mamba-2 block (SSD): scalar decay per head, matrix state ``(headdim, N)``, gated RMS norm.

    Per head ``h_t = exp(Δ_t A) h_{t-1} + Δ_t x_t B_tᵀ``, ``y_t = h_t C_t + D x_t``; then
    ``out_proj(rmsnorm(y · silu(z)))``. The scan is ``kernels.ssd`` (chunked).

    Arguments:
        d_model: features. d_state: ``N``. headdim: channels per head (``d_inner`` must be a multiple).
        d_conv: causal conv width. expand: ``d_inner / d_model``. ngroups: groups of heads sharing B and C.
        chunk_size: SSD chunk length.
    """

    RECURRENT = ("A_log", "D", "dt_bias")

    def __init__(self, d_model: int, d_state: int = 16, *, headdim: int = 16, d_conv: int = 4, expand: int = 2,
                 ngroups: int = 1, chunk_size: int = 32, dt_min: float = 1e-3, dt_max: float = 1e-1):
        super().__init__()
        self.d_model, self.d_state, self.d_conv = d_model, d_state, d_conv
        self.d_inner = expand * d_model
        if self.d_inner % headdim:
            raise ValueError(f"d_inner = {self.d_inner} must be a multiple of headdim = {headdim}")
        self.headdim, self.nheads, self.ngroups = headdim, self.d_inner // headdim, ngroups
        if self.nheads % ngroups:
            raise ValueError(f"ngroups = {ngroups} must divide the {self.nheads} heads")
        self.chunk_size = chunk_size
        self.conv_dim = self.d_inner + 2 * ngroups * d_state
        self.in_proj = nn.Linear(d_model, 2 * self.d_inner + 2 * ngroups * d_state + self.nheads, bias=False)
        self.conv = nn.Conv1d(self.conv_dim, self.conv_dim, d_conv, groups=self.conv_dim)
        dt = torch.exp(torch.rand(self.nheads) * (math.log(dt_max) - math.log(dt_min)) + math.log(dt_min))
        self.dt_bias = nn.Parameter(_inverse_softplus(dt))
        self.A_log = nn.Parameter(torch.log(torch.empty(self.nheads).uniform_(1, 16)))
        self.D = nn.Parameter(torch.ones(self.nheads))
        self.norm = nn.RMSNorm(self.d_inner, eps=1e-5)
        self.out_proj = nn.Linear(self.d_inner, d_model, bias=False)

    def initial_state(self, batch: int):
        w = self.D
        return (w.new_zeros(batch, self.conv_dim, self.d_conv - 1),
                w.new_zeros(batch, self.nheads, self.headdim, self.d_state))

    def _split(self, proj: torch.Tensor):
        return torch.split(proj, [self.d_inner, self.conv_dim, self.nheads], dim=-1)

    def _split_xbc(self, xbc: torch.Tensor):
        gn = self.ngroups * self.d_state
        x, B, C = torch.split(xbc, [self.d_inner, gn, gn], dim=-1)
        return x, B, C

    def forward(self, x: torch.Tensor, state=None, return_state: bool = False):
        """Parallel form. ``x`` ``(batch, length, d_model)``; ``state`` as from :meth:`initial_state` or None."""
        z, xbc, dt = self._split(self.in_proj(x))
        conv_prefix, h0 = (None, None) if state is None else state
        xbc, conv_next = _causal_conv(rearrange(xbc, "b l c -> b c l"), self.conv, conv_prefix)
        xs, B, C = self._split_xbc(F.silu(rearrange(xbc, "b c l -> b l c")))
        dt = F.softplus(dt + self.dt_bias)  # (b, L, heads)
        A = -torch.exp(self.A_log)
        out = kernels.ssd(
            rearrange(xs, "b l (h p) -> b l h p", p=self.headdim), dt, A,
            rearrange(B, "b l (g n) -> b l g n", g=self.ngroups),
            rearrange(C, "b l (g n) -> b l g n", g=self.ngroups),
            self.chunk_size, D=self.D, initial_states=h0, return_final_states=return_state,
        )
        y, h_last = out if return_state else (out, None)
        y = rearrange(y, "b l h p -> b l (h p)")
        y = self.out_proj(self.norm(y * F.silu(z)))
        return (y, (conv_next, h_last)) if return_state else y

    def step(self, x_t: torch.Tensor, state):
        """One step: ``x_t`` ``(batch, d_model)``; ``state = (conv prefix, h (b, heads, headdim, N))``."""
        conv_prefix, h = state
        z, xbc, dt = self._split(self.in_proj(x_t))
        xbc, conv_prefix = _conv_step(xbc, self.conv, conv_prefix)
        xs, B, C = self._split_xbc(F.silu(xbc))
        dt = F.softplus(dt + self.dt_bias)  # (b, heads)
        A = -torch.exp(self.A_log)
        xs = rearrange(xs, "b (h p) -> b h p", p=self.headdim)
        rep = self.nheads // self.ngroups
        B = rearrange(B, "b (g n) -> b g n", g=self.ngroups).repeat_interleave(rep, dim=1)  # (b, heads, N)
        C = rearrange(C, "b (g n) -> b g n", g=self.ngroups).repeat_interleave(rep, dim=1)
        h = torch.exp(dt * A)[..., None, None] * h + (dt[..., None] * xs)[..., None] * B[:, :, None, :]
        y = torch.einsum("bhpn,bhn->bhp", h, C) + self.D[:, None] * xs
        y = rearrange(y, "b h p -> b (h p)")
        return self.out_proj(self.norm(y * F.silu(z))), (conv_prefix, h)


# ====================================================================================================================
MIXERS: dict[str, type[nn.Module]] = {"lru": LRU, "s5": S5, "mamba": Mamba, "mamba2": Mamba2}


def make_mixer(kind: str, d_model: int, d_state: int, **kwargs) -> nn.Module:
    """Build a sequence mixer by name (``lru``, ``s5``, ``mamba``, ``mamba2``)."""
    if kind not in MIXERS:
        raise ValueError(f"unknown SSM kind {kind!r}; allowed: {', '.join(MIXERS)}")
    return MIXERS[kind](d_model, d_state, **kwargs)
