"""``lab bench int8``: SSDi8's INT8 path on this CPU against float32, measured as it is.

Two kinds of rows, each timed in turns (one call of each per round, :func:`lab.bench.layers.time_in_turns`; the
median of at least 7 rounds), so that load that comes and goes hits every implementation alike:

* ``ssd``: Mamba-2's SSD on random inputs with SSDi8's shapes, at one thread and at the process's default threads
  (torch's and Numba's): the float32 kernel (:func:`kernels.ssd`, its torch stages and its Numba stages: the faster
  is the float baseline), SSDi8's INT8 path (:func:`lab.methods.ssdi8.model.ssd_int8`, backend ``int``: the Numba
  kernels of :mod:`kernels.ssd_int8`, int8 codes, int32 sums, the float tail fused) and its fake-quant twin
  (the torch stages, the same codes multiplied as float32);
* ``gemm``: one projection ``(tokens, d_in) @ (d_in, d_out)`` in float32 (``torch.mm``) and in int8 -> int32
  (``torch._int_mm``), at the SSD bench's size and at a large size, to show whether this CPU's int8 product is
  faster at all (one thread).

The paper's speed-up (up to 1.4x for the SSD) is a GPU kernel's; nothing here claims it. The INT8 SSD first made one
``torch._int_mm`` call per (batch, chunk, group) block of small matrices (64 x 32 x 64 here): about 3x slower than
the float32 SSD on an AVX-512 Xeon, 5.1x on this AVX2 EPYC (torch 2.13, where ``torch._int_mm`` ran even the large
projection 60-70x slower than ``torch.mm``). A plain Numba batched int8 product (int32 sums, j innermost) was 1.4-9x
slower than float32 batched matmul. The Numba kernels now used multiply int16 copies of the codes two terms at a
time (a pair of code products fits in int16) into int32 sums over contiguous rows, and fuse the dequantisation, the
decays and the D skip into the loop that makes each output row: no score, decay or dequantised tensor is formed.
"""

from __future__ import annotations

import numpy as np
import torch
import xarray as xr

__all__ = ["format_int8_bench", "run_int8_bench"]

QUICK = dict(batch=4, length=256, heads=4, headdim=32, groups=4, state=16, chunk=32)
FULL = dict(batch=8, length=1024, heads=8, headdim=64, groups=8, state=32, chunk=64)
#: (tokens, d_in, d_out) of the large projection
LARGE_GEMM = (2048, 1024, 1024)
SSD_IMPLS = ("fp32_torch", "fp32_numba", "int8", "fake_quant")
GEMM_IMPLS = ("fp32", "int8")
THREADS = 1
#: the thread settings of the SSD rows: one thread, and the process's defaults (None: torch's and Numba's as started)
SSD_THREADS = (1, None)


def _ssd_inputs(s: dict):
    gen = torch.Generator().manual_seed(0)
    b, L, h, p, g, n = (s[k] for k in ("batch", "length", "heads", "headdim", "groups", "state"))
    x = torch.randn(b, L, h, p, generator=gen)
    dt = torch.nn.functional.softplus(torch.randn(b, L, h, generator=gen) - 2)
    A = -torch.rand(h, generator=gen) * 4 - 0.5
    B, C = torch.randn(b, L, g, n, generator=gen), torch.randn(b, L, g, n, generator=gen)
    return x, dt, A, B, C, torch.randn(h, generator=gen)


def _gemm_calls(m: int, k: int, n: int) -> dict:
    gen = torch.Generator().manual_seed(1)
    a, w = torch.randn(m, k, generator=gen), torch.randn(k, n, generator=gen)
    qa = torch.randint(-127, 128, (m, k), generator=gen, dtype=torch.int8)
    qw = torch.randint(-127, 128, (k, n), generator=gen, dtype=torch.int8)
    return {"fp32": lambda: torch.mm(a, w), "int8": lambda: torch._int_mm(qa, qw)}


def run_int8_bench(quick: bool = False, progress: bool = True) -> xr.Dataset:
    """Seconds per call of the SSD and of a projection, float32 against int8; ratios in the attrs.

    Arguments:
        quick: small shapes (seconds). progress: unused (the CLI prints the table).
    """
    import numba

    from lab.core.runtime import threads

    default_threads = f"{torch.get_num_threads()} torch, {numba.get_num_threads()} numba"
    with torch.no_grad():
        ssd_t = {}
        for n in SSD_THREADS:
            with threads(n):
                ssd_t[n] = _ssd_times(quick)
        with threads(THREADS):
            ds = _run(quick, ssd_t)
    ds.attrs["default_threads"] = default_threads
    return ds


def _ssd_times(quick: bool) -> dict:
    """Median seconds per call of each SSD implementation (:data:`SSD_IMPLS`), timed in turns."""
    import kernels
    from lab.bench.layers import time_in_turns
    from lab.methods.ssdi8.model import SSDScales, observe, ssd_int8

    s = QUICK if quick else FULL
    repeats, budget = (3, 0.5) if quick else (7, 3.0)
    x, dt, A, B, C, D = _ssd_inputs(s)
    q = s["chunk"]
    scales = SSDScales.from_amax(observe(x, dt, A, B, C, q))
    ssd_calls = {
        "fp32_torch": lambda: kernels.ssd(x, dt, A, B, C, q, D=D, backend="torch"),
        "fp32_numba": lambda: kernels.ssd(x, dt, A, B, C, q, D=D, backend="numba"),
        "int8": lambda: ssd_int8(x, dt, A, B, C, D, scales, chunk_size=q, backend="int"),
        "fake_quant": lambda: ssd_int8(x, dt, A, B, C, D, scales, chunk_size=q, backend="fake"),
    }
    return time_in_turns(ssd_calls, repeats, budget)


def _run(quick: bool, ssd_t: dict) -> xr.Dataset:
    s = QUICK if quick else FULL
    repeats, budget = (3, 0.5) if quick else (7, 3.0)
    tokens = s["batch"] * s["length"]
    sizes = {"model": (tokens, s["heads"] * s["headdim"], 2 * s["heads"] * s["headdim"]), "large": LARGE_GEMM}
    from lab.bench.layers import time_in_turns

    gemm_t = {size: time_in_turns(_gemm_calls(*mkn), repeats, budget) for size, mkn in sizes.items()}
    labels = ["1" if n == 1 else "default" for n in SSD_THREADS]
    ssd = np.array([[ssd_t[n][i] for i in SSD_IMPLS] for n in SSD_THREADS])
    gemm = np.array([[gemm_t[size][i] for i in GEMM_IMPLS] for size in sizes])
    ds = xr.Dataset(
        {"ssd_time": (("threads", "ssd_impl"), ssd, {"long_name": "SSD wall time per call (median)", "units": "s"}),
         "gemm_time": (("size", "gemm_impl"), gemm, {"long_name": "projection wall time per call (median)",
                                                     "units": "s"})},
        coords={"threads": labels, "ssd_impl": list(SSD_IMPLS), "gemm_impl": list(GEMM_IMPLS), "size": list(sizes),
                "gemm_shape": (("size",), [f"{m}x{k}x{n}" for m, k, n in sizes.values()])},
        attrs={**{k: int(v) for k, v in s.items()}, "torch_threads": torch.get_num_threads(), "quick": int(quick),
               "torch": str(torch.__version__)},
    )
    for n, label in zip(SSD_THREADS, labels):
        best_fp = min(ssd_t[n]["fp32_torch"], ssd_t[n]["fp32_numba"])
        ds.attrs[f"ssd_int8_x_best_fp32_threads_{label}"] = ssd_t[n]["int8"] / best_fp
    ds.attrs["ssd_int8_x_best_fp32"] = max(ds.attrs[f"ssd_int8_x_best_fp32_threads_{label}"] for label in labels)
    for size in sizes:
        ds.attrs[f"gemm_{size}_int8_x_fp32"] = gemm_t[size]["int8"] / gemm_t[size]["fp32"]
    return ds


def format_int8_bench(ds: xr.Dataset) -> str:
    """The table ``lab bench int8`` prints."""
    a = ds.attrs
    lines = [f"int8 (SSD batch {a['batch']}, length {a['length']}, {a['heads']} heads x {a['headdim']}, "
             f"{a['groups']} groups, state {a['state']}, chunk {a['chunk']}; torch {a['torch']}; default threads "
             f"{a.get('default_threads', '?')}): ms per call, and x the best float32 at the same threads",
             f"{'SSD':<14}" + "".join(f"{'ms ' + str(t) + ' thr':>16}{'x fp32':>9}" for t in ds.threads.values)]
    best = {t: float(ds.ssd_time.sel(threads=t, ssd_impl=["fp32_torch", "fp32_numba"]).min())
            for t in ds.threads.values}
    for impl in ds.ssd_impl.values:
        row = f"{impl:<14}"
        for t in ds.threads.values:
            v = float(ds.ssd_time.sel(threads=t, ssd_impl=impl))
            row += f"{1e3 * v:>16.2f}{v / best[t]:>8.2f}x"
        lines.append(row)
    lines.append(f"{'projection (1 thread)':<22}{'fp32 ms':>10}{'int8 ms':>10}{'int8 x fp32':>13}")
    for size in ds.size.values:
        t = ds.gemm_time.sel(size=size)
        fp, i8 = float(t.sel(gemm_impl="fp32")), float(t.sel(gemm_impl="int8"))
        lines.append(f"{str(ds.gemm_shape.sel(size=size).values):<22}{1e3 * fp:>10.3f}{1e3 * i8:>10.3f}"
                     f"{i8 / fp:>12.2f}x")
    worst = a["ssd_int8_x_best_fp32"]
    verdict = "not slower" if worst <= 1 else "slower"
    lines.append(f"SSDi8's INT8 SSD is {verdict} than the best float32 SSD on this CPU at every thread setting "
                 f"(worst x{worst:.2f}); the paper's speed-up is a GPU kernel's")
    return "\n".join(lines)
