"""SSDi8's INT8 building blocks: symmetric quantisers whose scales run along chosen axes, the int8 x int8 -> int32
matrix product (``torch._int_mm``) beside its fake-quant twin, and the W8A8 / W4A8 linear layer.

A quantiser maps a float tensor ``t`` with scale ``s`` (broadcast against ``t``: one per tensor, per channel, per
chunk...) to ``q = clamp(round(t / s), -Q, Q)`` with ``Q = 2^(bits-1) - 1``, held as ``int8``; ``s = amax / Q`` from
calibration. Every matrix product of quantised operands goes through :func:`qmatmul`, which has two backends that do
the same arithmetic:

* ``int``: real ``int8`` operands, ``int32`` accumulation (``torch._int_mm`` on 2-D slices), then one float rescale
  ``(q_a q_b) * s_a * s_b`` (per row of ``a``, per column of ``b``);
* ``fake``: the fake-quant twin in float32: the codes as float tensors multiplied by an ordinary float matmul, then
  the same rescale.

Products of 8-bit codes are at most 127² = 16129, so a float32 sum of up to 1040 of them is an exact integer
(below 2^24) whatever the order: the two backends then agree bit for bit, and any difference is a bug in the
integer path (the tests and the ``int8_codes_equal_fake_quant`` and ``int8_equals_fake_quant`` claims check it).
Dequantising first (``(q_a s_a) @ (q_b s_b)``, the textbook fake quant) differs from both by float rounding only;
where a product is quantised again (``C·Bᵀ``, the states), that rounding can flip a code that sits on a rounding
boundary.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

__all__ = ["BACKENDS", "EPS", "QLinear", "amax", "dequantize", "fake_quant", "qmatmul", "qmax", "quantize",
           "scale_of"]

#: how quantised matrix products are computed (see the module docstring)
BACKENDS = ("int", "fake")
#: smallest scale (an all-zero channel gets a tiny, harmless scale instead of a division by zero)
EPS = 1e-12


def qmax(bits: int) -> int:
    """Largest code of a symmetric ``bits``-bit quantiser: 127 for 8 bits, 7 for 4."""
    return 2 ** (bits - 1) - 1


def scale_of(amax_: torch.Tensor, bits: int = 8) -> torch.Tensor:
    """The scale that maps ``amax`` to the largest code (any shape: one scale per entry)."""
    return (amax_.float() / qmax(bits)).clamp_min(EPS)


def quantize(t: torch.Tensor, scale: torch.Tensor, bits: int = 8) -> torch.Tensor:
    """``clamp(round(t / scale), -Q, Q)`` as ``int8`` (``scale`` broadcasts against ``t``)."""
    q = qmax(bits)
    return torch.round(t / scale).clamp_(-q, q).to(torch.int8)


def dequantize(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """``q * scale`` in float32."""
    return q.float() * scale


def fake_quant(t: torch.Tensor, scale: torch.Tensor, bits: int = 8) -> torch.Tensor:
    """Quantise and dequantise: the float value the INT8 code stands for."""
    return dequantize(quantize(t, scale, bits), scale)


def amax(t: torch.Tensor, keep: tuple[int, ...] = ()) -> torch.Tensor:
    """Largest ``|t|`` over every dimension but ``keep`` (in that order); ``keep=()`` gives a 0-d tensor."""
    keep = tuple(d % t.dim() for d in keep)
    rest = [d for d in range(t.dim()) if d not in keep]
    a = t.detach().abs().float().permute(*keep, *rest)
    return a.reshape(*a.shape[: len(keep)], -1).amax(-1)


def qmatmul(qa: torch.Tensor, qb: torch.Tensor, sa: torch.Tensor, sb: torch.Tensor,
            backend: str = "int") -> torch.Tensor:
    """``(qa sa) @ (qb sb)`` for int8 operands with a scale per row of ``a`` and per column of ``b``.

    Arguments:
        qa: ``(..., m, k)`` int8. qb: ``(..., k, n)`` int8 (the same leading dimensions).
        sa: broadcastable to ``(..., m, 1)``. sb: broadcastable to ``(..., 1, n)``.
        backend: ``int`` (int32 accumulation by ``torch._int_mm``) or ``fake`` (float32 products of the codes).

    Returns:
        ``(..., m, n)`` float32.
    """
    if backend == "fake":
        return (qa.float() @ qb.float()) * sa * sb
    if backend != "int":
        raise ValueError(f"backend={backend!r} is not allowed; allowed: {', '.join(BACKENDS)}")
    lead, (m, k), n = qa.shape[:-2], qa.shape[-2:], qb.shape[-1]
    if qb.shape[:-2] != lead or qb.shape[-2] != k:
        raise ValueError(f"qa {tuple(qa.shape)} and qb {tuple(qb.shape)} do not multiply")
    a, b = qa.reshape(-1, m, k), qb.reshape(-1, k, n)
    acc = torch.stack([torch._int_mm(a[i], b[i]) for i in range(a.shape[0])]) if a.shape[0] != 1 else \
        torch._int_mm(a[0], b[0])[None]  # (batch, m, n) int32
    return acc.reshape(*lead, m, n).float() * sa * sb


@dataclass
class QLinear:
    """A bias-free linear layer with ``bits``-bit weights (per output channel) and INT8 input (per tensor, static).

    Attributes:
        weight_t: ``(in, out)`` int8 codes of ``Wᵀ`` (4-bit codes are held in int8: values in [-7, 7]).
        weight_scale: ``(out,)``. act_scale: 0-d, from the calibrated input amax. bits: weight bits.
    """

    weight_t: torch.Tensor
    weight_scale: torch.Tensor
    act_scale: torch.Tensor
    bits: int

    @classmethod
    def from_linear(cls, linear: nn.Linear, bits: int, act_amax: torch.Tensor) -> QLinear:
        if linear.bias is not None:
            raise ValueError("QLinear holds bias-free layers (Mamba-2's in_proj and out_proj)")
        w = linear.weight.detach().float()  # (out, in)
        s = scale_of(amax(w, keep=(0,)), bits)  # (out,)
        return cls(quantize(w, s[:, None], bits).t().contiguous(), s, scale_of(act_amax), bits)

    def __call__(self, x: torch.Tensor, backend: str = "int") -> torch.Tensor:
        """``x`` ``(..., in)`` float -> ``(..., out)`` float."""
        shape = x.shape
        qx = quantize(x.reshape(-1, shape[-1]), self.act_scale)  # (rows, in) int8
        y = qmatmul(qx, self.weight_t, self.act_scale, self.weight_scale[None, :], backend)
        return y.reshape(*shape[:-1], -1)

    @property
    def nbytes(self) -> int:
        """Bytes of the weights as held (int8 codes and float32 scales)."""
        return self.weight_t.nbytes + self.weight_scale.nbytes
