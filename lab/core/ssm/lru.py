"""The Linear Recurrent Unit (Orvieto et al. 2023, "Resurrecting recurrent neural networks for long sequences")."""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from .diagonal import DiagonalSSM, complex_of, resize_parameter

__all__ = ["LRU"]


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
        return torch.exp(complex_of(-torch.exp(self.nu_log), torch.exp(self.theta_log)))

    def input_matrix(self) -> torch.Tensor:
        return torch.exp(self.gamma_log)[:, None] * complex_of(self.B_re, self.B_im)

    def output_matrix(self) -> torch.Tensor:
        return complex_of(self.C_re, self.C_im)

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
            resize_parameter(self, name, new, optimizer, moment_map)
        return self
