"""S5 (Smith et al. 2023, "Simplified state space layers for sequence modeling") and its HiPPO-N initialisation."""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from .diagonal import DiagonalSSM, complex_of

__all__ = ["S5", "hippo_n_eigenvalues"]


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
        return complex_of(-torch.exp(self.lambda_re_log), self.lambda_im)

    def eigenvalues(self) -> torch.Tensor:
        lam_c = self.continuous_eigenvalues()
        return torch.exp(lam_c * torch.exp(self.log_dt))

    def input_matrix(self) -> torch.Tensor:
        lam_c = self.continuous_eigenvalues()
        zoh = (torch.exp(lam_c * torch.exp(self.log_dt)) - 1) / lam_c  # (N,)
        return zoh[:, None] * complex_of(self.B_re, self.B_im)

    def output_matrix(self) -> torch.Tensor:
        return 2 * complex_of(self.C_re, self.C_im)
