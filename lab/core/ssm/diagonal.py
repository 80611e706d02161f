"""Base of the diagonal complex linear time-invariant layers (:class:`DiagonalSSM`) and the in-place resizing of a
parameter together with its optimiser moments, shared by :mod:`.lru` and :mod:`.s5`."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from einops import rearrange
from torch import nn

import kernels

__all__ = ["DiagonalSSM", "complex_of", "resize_parameter"]


def complex_of(re: torch.Tensor, im: torch.Tensor) -> torch.Tensor:
    """``re + i im`` as a complex tensor."""
    return torch.complex(re, im)


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
        h = kernels.linear_scan_step(state, self.eigenvalues(), self._project_in(x_t))
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
            resize_parameter(self, name, new, optimizer, lambda t, a=axis: t.index_select(a, idx).clone())
        return self


def resize_parameter(module: nn.Module, name: str, new: torch.Tensor, optimizer, moment_map) -> None:
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
