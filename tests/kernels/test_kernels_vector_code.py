"""The Numba kernels' hot loops compile to packed vector code on x86-64.

The same source has compiled to vector code on one machine and scalar code on another (AVX-512 vs AVX2), and a
negative-index wrap once made the causal conv assemble its vector loads lane by lane. Nothing else in the tests
notices that: results stay the same, only 2-8x slower. These tests compile each helper afresh (no cache), call it
once in float32 and read its assembly.
"""

import platform
import re

import numpy as np
import pytest
from numba import njit

pytestmark = pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"), reason="x86-64 assembly")

PACKED = re.compile(r"\tv?(?:fn?m(?:add|sub)\d*ps|mulps|addps|subps)\t")  # packed float32 arithmetic
SCALAR = re.compile(r"\tv?(?:fn?m(?:add|sub)\d*ss|mulss|addss|subss)\t")
LANE_BY_LANE = re.compile(r"\tv?(?:insertps|extractps)\t")


def _asm(module, name, *args):
    from kernels._numba.common import FAST_FLAGS, NoAliasCompiler

    fn = njit(error_model="numpy", fastmath=FAST_FLAGS, pipeline_class=NoAliasCompiler)(getattr(module, name).py_func)
    fn(*args)
    return fn.inspect_asm(fn.signatures[0])


def _f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def _selective_cases(rng):
    from kernels._numba import selective_scan as ss
    from kernels._numba import selective_scan_backward as sb

    n, lanes, chunk = 16, ss.LANES, ss.CHUNK
    io = _f32(rng, 4, chunk, lanes)
    keep = np.ones(chunk, np.float32)
    return {
        "_forward_chunk": (ss, (_f32(rng, n, lanes), _f32(rng, n, lanes), io[0], io[1], io[2], io[3],
                                _f32(rng, lanes), _f32(rng, chunk, n), _f32(rng, chunk, n), keep, chunk, True)),
        "_recompute_chunk": (sb, (_f32(rng, chunk + 1, n, lanes), _f32(rng, chunk, n, lanes), _f32(rng, n, lanes),
                                  io[0], io[2], _f32(rng, chunk, n), keep, chunk, _f32(rng, chunk, n), io[3],
                                  True, True)),
        "_dt_step": (ss, (io[0], io[1], io[2], _f32(rng, lanes), chunk, True)),
    }


def test_selective_scan_state_loops_are_packed():
    rng = np.random.default_rng(0)
    for name, (module, args) in _selective_cases(rng).items():
        asm = _asm(module, name, *args)
        # a vector body (a scalar copy may sit beside it for the remainder or a failed run-time check)
        assert len(PACKED.findall(asm)) >= 8, (name, len(PACKED.findall(asm)), len(SCALAR.findall(asm)))


def test_causal_conv_rows_are_packed_and_load_whole_vectors():
    from kernels._numba import causal_conv as cc

    rng = np.random.default_rng(0)
    x, y, g = _f32(rng, 1000), np.empty(1000, np.float32), np.zeros(1003, np.float32)
    w = [np.float32(v) for v in (0.1, 0.2, 0.3, 0.4, 0.5)]
    for name, args in [("_conv_row", (x, y, *w, True)), ("_conv_grad_row", (x, _f32(rng, 1000), g, *w)),
                       ("_conv_taps_row", (x, g, y, *w[:4], np.float32(0)))]:  # fmt: skip
        asm = _asm(cc, name, *args)
        assert len(PACKED.findall(asm)) >= 4, name
        assert not LANE_BY_LANE.findall(asm), (name, "vector loads assembled lane by lane")


def test_chunk_transpose_uses_shuffles():
    from kernels._numba import selective_scan as ss

    rng = np.random.default_rng(0)
    src, dst = _f32(rng, 16, 64), np.empty((64, 16), np.float32)
    asm = _asm(ss, "transpose_chunk", src, dst, 16, 64)
    assert re.search(r"\tv?(?:unpck[lh]ps|shufps|perm2f128|permps|permt2ps|insertf128)\t", asm)
    assert np.array_equal(dst, src.T)
