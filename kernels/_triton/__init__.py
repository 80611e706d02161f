"""Triton GPU kernels (imported lazily: triton is optional; on CPU tensors they run only under TRITON_INTERPRET=1)."""
