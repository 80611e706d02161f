"""Scan benchmark: :func:`run_scan_bench` measures everything in one run and returns an ``xarray.Dataset``;
:func:`format_scan_bench` prints it as tables with the targets and pass/fail.

What is measured (CPU; all times are medians of repeats with the caches flushed before each repeat by touching a
64 MiB buffer; implementations compared with each other are timed in turns, so that load from other processes on
a shared machine hits them alike):

* ``bandwidth``: element-wise ``out = a * b + b`` in Numba over the same ``(rows, T)`` float32 arrays as the scan,
  1 thread and all threads (``numba.set_num_threads``), output preallocated: the machine's bandwidth for the scan's
  access pattern (12 bytes an element). It is measured once up front (1 thread and all) and again for every
  ``linear_scan`` case on that case's arrays, in the same rounds as the scans (the percentages use the latter).
* ``linear_scan`` per case (layouts and sizes) and implementation, forward and forward+backward:
  ``numba`` is ``linear_scan(..., out=...)`` into a preallocated output (the kernel itself, comparable to the
  bandwidth figure); ``numba_alloc`` is the plain call, which also allocates (page-faults) its output;
  ``torch_loop`` is a Python loop of ``torch.addcmul`` over time in its best layout ``(T, ...)`` (forward+backward
  through autograd); ``pscan`` a Blelloch scan in torch; ``jax`` ``jax.lax.associative_scan`` (when installed).
  GB/s counts 12 bytes an element forward and 32 forward+backward (backward reads ``a, h, g`` and writes
  ``da, db``).
* ``selective_scan`` at Mamba-1 sizes: the Numba kernels vs :func:`kernels.selective_scan_ref`, forward and
  forward+backward; time, the largest single tensor any torch op returns during a call, and the *peak extra
  resident memory* (the rise of the process's peak RSS during the calls, measured in a fresh subprocess after a
  warm-up; torch allocations are invisible to tracemalloc),
  compared with the size of one ``(batch, channels, length, state)`` tensor. The peak is Linux's ``VmHWM``, reset
  through ``/proc/self/clear_refs`` after the warm-up (``ru_maxrss`` would carry the parent's peak into the child).
* ``ssd``: the chunked form vs the sequential recurrence at scaled-down Mamba-2 sizes, forward and forward+backward.
* first-call time of ``linear_scan`` in a fresh process, with Numba's on-disk cache warm and (full run) cold.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
import time
from importlib.util import find_spec

import numpy as np
import torch

__all__ = ["run_scan_bench", "format_scan_bench"]

_PKG_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _log(progress: bool, msg: str) -> None:
    if progress:
        print(f"[bench scan] {msg}", file=sys.stderr, flush=True)


class _Flusher:
    """Touches a 64 MiB buffer so that the next measurement starts with cold caches."""

    def __init__(self):
        self.buf = torch.zeros(16 * 2**20)

    def __call__(self):
        self.buf.add_(1.0)


def _time(fn, flush, repeats: int, budget_s: float = 3.0, setup=None, warmup: bool = False) -> list[float]:
    """Times of ``repeats`` calls (fewer if one call is slow: at least 2 and about ``budget_s`` in all).

    ``warmup`` makes one untimed call first (JIT compilation or loading it from Numba's cache).
    """
    if warmup:
        fn()
    times = []
    for i in range(repeats):
        if setup is not None:
            setup()
        flush()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        if i >= 1 and sum(times) > budget_s:
            break
    return times


# ----------------------------------------------------------------------------------------------------------------
def _bandwidth(rows: int, t: int, flush, repeats: int) -> dict[str, float]:
    import numba

    from ._common import empty_offset
    from ._numba.linear_scan import axpy_rows

    a = torch.rand(rows, t)
    b = torch.randn(rows, t)
    out = empty_offset((rows, t), torch.float32, "cpu", avoid=(a, b))
    an, bn, on = a.numpy(), b.numpy(), out.numpy()
    axpy_rows(an, bn, on)
    res = {}
    n_all = numba.config.NUMBA_NUM_THREADS
    for label, n in (("1", 1), ("all", n_all)):
        numba.set_num_threads(n)
        ts = _time(lambda: axpy_rows(an, bn, on), flush, repeats)
        res[label] = 12 * a.numel() / float(np.median(ts)) / 1e9
    numba.set_num_threads(n_all)
    return res


def _jax_scan():
    if find_spec("jax") is None:
        return None
    import jax
    import jax.numpy as jnp

    def combine(left, right):
        return left[0] * right[0], right[0] * left[1] + right[1]

    @jax.jit
    def scan(a, b):
        return jax.lax.associative_scan(combine, (a, b), axis=-1)[1]

    def run(a, b):
        return scan(jnp.asarray(a.numpy()), jnp.asarray(b.numpy())).block_until_ready()

    return run


def _linear_cases(quick: bool):
    if quick:
        return [
            ("time_contiguous", (4, 32, 512), -1),
            ("channels_last", (4, 512, 32), 1),
            ("long", (1, 8, 2048), -1),
            ("short", (32, 16, 64), -1),
        ]
    return [
        ("time_contiguous", (16, 256, 4096), -1),
        ("channels_last", (16, 4096, 256), 1),
        ("long", (2, 64, 65536), -1),
        ("short", (256, 64, 256), -1),
    ]


_LS_IMPLS = ("numba", "numba_alloc", "torch_loop", "pscan", "jax")
_MODES = ("fwd", "fwd_bwd")


def _time_round_robin(fns: dict, flush, repeats: int, budget_s: float, warm=()) -> dict[str, list[float]]:
    """Time several functions in turns (one call of each per round), so load changes on a shared machine hit them
    alike. A function drops out after 2 calls once its calls add up to more than ``budget_s``. Those in ``warm``
    get one untimed call first."""
    for k in warm:
        fns[k]()
    times = {k: [] for k in fns}
    for _ in range(repeats):
        for k, fn in fns.items():
            if len(times[k]) >= 2 and sum(times[k]) > budget_s:
                continue
            flush()
            t0 = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t0)
    return times


def _bench_linear(shape, dim, flush, repeats, jax_run, budget):
    from ._common import empty_offset, numba_threads_for
    from ._numba.linear_scan import axpy_rows
    from .linear_scan import linear_scan, linear_scan_pscan, linear_scan_ref

    a = torch.rand(shape) * 0.5 + 0.5
    b = torch.randn(shape)
    g = torch.randn(shape)
    out = empty_offset(b.shape, b.dtype, "cpu", avoid=(a, b))  # placed as linear_scan places its own outputs
    a_t = a.movedim(dim, 0).contiguous()  # the torch loop's best layout: time first
    b_t = b.movedim(dim, 0).contiguous()
    g_t = g.movedim(dim, 0).contiguous()
    rows = (-1, shape[-1])
    an, bn, on = a.view(rows).numpy(), b.view(rows).numpy(), out.view(rows).numpy()

    def _axpy(x, y, o):
        with numba_threads_for(x.size):  # as many threads as linear_scan itself uses for this size
            axpy_rows(x, y, o)

    def loop_fwd():
        o = torch.empty_like(b_t)
        h = torch.zeros_like(b_t[0])
        for t in range(b_t.shape[0]):
            h = torch.addcmul(b_t[t], a_t[t], h, out=o[t])
        return o

    fwd = {
        "axpy": lambda: _axpy(an, bn, on),  # this case's bandwidth reference, measured in the same rounds
        "numba": lambda: linear_scan(a, b, dim=dim, backend="numba", out=out),
        "numba_alloc": lambda: linear_scan(a, b, dim=dim, backend="numba"),
        "torch_loop": loop_fwd,
        "pscan": lambda: linear_scan_pscan(a, b, dim=dim),
    }
    if jax_run is not None:
        a_j, b_j = a.movedim(dim, -1).contiguous(), b.movedim(dim, -1).contiguous()
        fwd["jax"] = lambda: jax_run(a_j, b_j)
    with torch.no_grad():
        t_fwd = _time_round_robin(
            fwd,
            flush,
            repeats,
            budget,
            warm=("axpy", "numba", "numba_alloc", "jax") if jax_run else ("axpy", "numba", "numba_alloc"),
        )

    def fwd_bwd(fn, x_a, x_b, x_g):
        def run():
            ar = x_a.detach().requires_grad_()
            br = x_b.detach().requires_grad_()
            fn(ar, br).backward(x_g)

        return run

    t_fb = _time_round_robin(
        {
            "numba_alloc": fwd_bwd(lambda x, y: linear_scan(x, y, dim=dim, backend="numba"), a, b, g),
            "torch_loop": fwd_bwd(lambda x, y: linear_scan_ref(x, y, dim=0), a_t, b_t, g_t),
            "pscan": fwd_bwd(lambda x, y: linear_scan_pscan(x, y, dim=dim), a, b, g),
        },
        flush,
        repeats,
        budget,
        warm=("numba_alloc",),
    )
    res = {(k, "fwd"): v for k, v in t_fwd.items() if k != "axpy"}
    res.update({(k, "fwd_bwd"): v for k, v in t_fb.items()})
    bandwidth = 12 * a.numel() / float(np.median(t_fwd["axpy"])) / 1e9
    return res, bandwidth


def _first_call(cold: bool) -> float:
    """Seconds for the first ``linear_scan`` forward+backward (both layouts, float32) in a fresh process."""
    code = (
        "import time, torch, sys\n"
        f"sys.path.insert(0, {_PKG_ROOT!r})\n"
        "from kernels import linear_scan\n"
        "a = torch.rand(4, 8, 32, requires_grad=True); b = torch.randn(4, 8, 32, requires_grad=True)\n"
        "t0 = time.perf_counter()\n"
        "linear_scan(a, b, backend='numba').sum().backward()\n"
        "linear_scan(a, b, dim=1, backend='numba').sum().backward()\n"
        "print(time.perf_counter() - t0)\n"
    )
    env = dict(os.environ)
    with tempfile.TemporaryDirectory() as tmp:
        if cold:
            env["NUMBA_CACHE_DIR"] = tmp
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    if out.returncode != 0:
        return float("nan")
    return float(out.stdout.strip().splitlines()[-1])


# ----------------------------------------------------------------------------------------------------------------
_SS_CHILD = r"""
import json, resource, sys, time, torch
sys.path.insert(0, {root!r})
from kernels import selective_scan, selective_scan_ref
impl, mode, bsz, dim, length, state, repeats = {args!r}
torch.manual_seed(0)
def inputs(bsz, dim, length, state, grad):
    u = torch.randn(bsz, dim, length); delta = torch.randn(bsz, dim, length) * 0.5 - 1.0
    A = -torch.rand(dim, state) * 2 - 0.1; B = torch.randn(bsz, state, length); C = torch.randn(bsz, state, length)
    D = torch.randn(dim); z = torch.randn(bsz, dim, length)
    xs = [u, delta, A, B, C, D, z]
    for x in xs: x.requires_grad_(grad)
    return xs
def call(xs):
    u, delta, A, B, C, D, z = xs
    if impl == "numba":
        return selective_scan(u, delta, A, B, C, D=D, z=z, delta_softplus=True, backend="numba")
    return selective_scan_ref(u, delta, A, B, C, D=D, z=z, delta_softplus=True)
grad = mode == "fwd_bwd"
small = inputs(1, 64, 256, state, grad)  # warm-up (parallel path too): loads the compiled kernels
y = call(small)
if grad: y.sum().backward()
xs = inputs(bsz, dim, length, state, grad)
g = torch.randn(bsz, dim, length)
def status_kib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)
try:  # reset this process's peak RSS (VmHWM) to its current RSS, then read the peak afterwards
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    peak0 = status_kib("VmRSS")
    peak = lambda: status_kib("VmHWM")
except OSError:  # not Linux: ru_maxrss (which a child inherits from its parent: less reliable)
    peak = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    peak0 = peak()
times = []
for i in range(repeats):
    t0 = time.perf_counter()
    with torch.set_grad_enabled(grad):
        y = call(xs)
        if grad:
            y.backward(g)
    times.append(time.perf_counter() - t0)
    del y
    for x in xs: x.grad = None
    if sum(times) > 20: break
peak1 = peak()
# one more (untimed) call with a spy on every tensor torch hands back: the largest single allocation
biggest = [0]
class Spy(torch.overrides.TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {{}}))
        for t in out if isinstance(out, (tuple, list)) else [out]:
            if isinstance(t, torch.Tensor):
                biggest[0] = max(biggest[0], t.numel() * t.element_size())
        return out
with torch.set_grad_enabled(grad), Spy():
    y = call(xs)
    if grad:
        y.backward(g)
print(json.dumps({{"times": times, "peak_extra_bytes": (peak1 - peak0) * 1024, "max_tensor_bytes": biggest[0]}}))
"""


def _bench_selective(impl, mode, sizes, repeats, in_process=False):
    code = _SS_CHILD.format(root=_PKG_ROOT, args=(impl, mode, *sizes, repeats))
    if in_process:  # quick mode: same code, no fresh process, so the peak-memory figure is meaningless
        import contextlib
        import io

        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            exec(compile(code, "<selective_scan bench>", "exec"), {"__name__": "__bench__"})
        r = json.loads(buf.getvalue().strip().splitlines()[-1])
        r["peak_extra_bytes"] = float("nan")
        return r
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        raise RuntimeError(f"selective_scan benchmark child failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _bench_ssd(sizes, chunk, flush, repeats, budget):
    from .ssd import ssd, ssd_ref

    bsz, length, heads, headdim, state = sizes
    torch.manual_seed(0)
    x = torch.randn(bsz, length, heads, headdim)
    dt = torch.rand(bsz, length, heads) * 0.1
    A = -torch.rand(heads) - 0.5
    B = torch.randn(bsz, length, 1, state)
    C = torch.randn(bsz, length, 1, state)
    with torch.no_grad():
        t_fwd = _time_round_robin(
            {"chunked": lambda: ssd(x, dt, A, B, C, chunk), "sequential": lambda: ssd_ref(x, dt, A, B, C)},
            flush,
            repeats,
            budget,
            warm=("chunked",),
        )

    def fb(fn):
        def run():
            xs = [t.detach().requires_grad_() for t in (x, dt, A, B, C)]
            fn(*xs).sum().backward()

        return run

    t_fb = _time_round_robin(
        {"chunked": fb(lambda *xs: ssd(*xs, chunk)), "sequential": fb(ssd_ref)}, flush, repeats, budget
    )
    res = {(k, "fwd"): v for k, v in t_fwd.items()}
    res.update({(k, "fwd_bwd"): v for k, v in t_fb.items()})
    return res


# ----------------------------------------------------------------------------------------------------------------
def run_scan_bench(quick: bool = False, progress: bool = True):
    """Run the scan benchmark (bandwidth, linear_scan, selective_scan, ssd, first-call time) and return a Dataset.

    Arguments:
        quick: shrink every shape (the whole run takes ~20 s; for smoke tests). Numbers are then not meaningful.
        progress: print one line per step to stderr.

    Returns:
        ``xarray.Dataset`` with raw times (``*_times``, seconds, with a ``repeat`` dim, NaN-padded), medians,
        derived GB/s, percent of bandwidth, speed-ups, peak memory and a ``target`` table (goal, measured, passed).
        ``attrs`` describe the machine, the shapes and what each variable means.
    """
    import numba
    import xarray as xr

    from ._common import reuse_freed_memory

    # steady state of a training loop: freed buffers are reused, not page-faulted afresh (process-wide, so the
    # quick smoke run, which shares a process with other tests, leaves it alone)
    malloc_tuned = False if quick else reuse_freed_memory()
    flush = _Flusher()
    repeats = 3 if quick else 7
    budget = 1.0 if quick else 6.0
    cases = _linear_cases(quick)
    t_start = time.perf_counter()

    # bandwidth, with the rows x T of the main time-contiguous case
    main_shape = cases[0][1]
    _log(progress, f"bandwidth on {main_shape} float32 ...")
    bw = _bandwidth(main_shape[0] * main_shape[1], main_shape[2], flush, repeats)
    _log(progress, f"bandwidth: {bw['1']:.1f} GB/s (1 thread), {bw['all']:.1f} GB/s (all threads)")

    jax_run = _jax_scan()
    max_rep = repeats
    ls_times = np.full((len(cases), len(_LS_IMPLS), len(_MODES), max_rep), np.nan)
    case_bw = np.full(len(cases), np.nan)
    for ci, (name, shape, dim) in enumerate(cases):
        _log(progress, f"linear_scan {name} {shape} dim={dim} ...")
        res, case_bw[ci] = _bench_linear(shape, dim, flush, repeats, jax_run, budget)
        for (impl, mode), ts in res.items():
            ls_times[ci, _LS_IMPLS.index(impl), _MODES.index(mode), : len(ts)] = ts
    numel = np.array([math.prod(s) for _, s, _ in cases], dtype=float)
    ls_med = _nanmedian(ls_times)
    bytes_per = np.array([12.0, 32.0])
    ls_gbs = numel[:, None, None] * bytes_per[None, None, :] / ls_med / 1e9
    ls_pct = 100 * ls_gbs / case_bw[:, None, None]

    _log(progress, "first-call time (fresh process, warm cache) ...")
    first_warm = _first_call(cold=False)
    first_cold = float("nan")
    if not quick:
        _log(progress, "first-call time (fresh process, empty cache: compiles) ...")
        first_cold = _first_call(cold=True)

    ss_sizes = (2, 32, 256, 16) if quick else (4, 256, 2048, 16)
    ss_impls, ss_rep = ("numba", "ref"), (2 if quick else 5)
    ss_times = np.full((2, 2, ss_rep), np.nan)
    ss_peak = np.full((2, 2), np.nan)
    ss_max = np.full((2, 2), np.nan)
    for ii, impl in enumerate(ss_impls):
        for mi, mode in enumerate(_MODES):
            where = "in process, no memory figure" if quick else "subprocess"
            _log(progress, f"selective_scan {impl} {mode} {ss_sizes} ({where}) ...")
            reps = ss_rep if impl == "numba" else (1 if not quick else 2)
            r = _bench_selective(impl, mode, ss_sizes, reps, in_process=quick)
            ss_times[ii, mi, : len(r["times"])] = r["times"]
            ss_peak[ii, mi] = r["peak_extra_bytes"]
            ss_max[ii, mi] = r["max_tensor_bytes"]
    ss_med = _nanmedian(ss_times)
    bdln_bytes = math.prod(ss_sizes) * 4

    ssd_sizes = (1, 256, 4, 32, 32) if quick else (2, 2048, 8, 64, 64)
    ssd_chunk = 32 if quick else 64
    _log(progress, f"ssd {ssd_sizes} chunk {ssd_chunk} ...")
    ssd_res = _bench_ssd(ssd_sizes, ssd_chunk, flush, repeats, budget)
    ssd_impls = ("chunked", "sequential")
    ssd_times = np.full((2, 2, max_rep), np.nan)
    for (impl, mode), ts in ssd_res.items():
        ssd_times[ssd_impls.index(impl), _MODES.index(mode), : len(ts)] = ts
    ssd_med = _nanmedian(ssd_times)

    # targets
    case_names = [c[0] for c in cases]
    li = {k: i for i, k in enumerate(_LS_IMPLS)}

    def med(case, impl, mode):
        return float(ls_med[case_names.index(case), li[impl], _MODES.index(mode)])

    targets = []
    for case in ("time_contiguous", "channels_last"):
        pct = float(ls_pct[case_names.index(case), li["numba"], 0])
        targets.append((f"linear_scan fwd {case}: % of bandwidth", ">= 75", pct, pct >= 75))
        sp = med(case, "torch_loop", "fwd") / med(case, "numba", "fwd")
        targets.append((f"linear_scan fwd {case}: x torch loop", ">= 10", sp, sp >= 10))
        sp = med(case, "pscan", "fwd") / med(case, "numba", "fwd")
        targets.append((f"linear_scan fwd {case}: x log-depth torch scan", ">= 20", sp, sp >= 20))
        ratio = med(case, "numba_alloc", "fwd_bwd") / med(case, "numba_alloc", "fwd")
        targets.append((f"linear_scan fwd+bwd / fwd {case}", "<= 3", ratio, ratio <= 3))
    sp = float(ss_med[1, 0] / ss_med[0, 0])
    targets.append(("selective_scan fwd: x torch reference loop", ">= 10", sp, sp >= 10))
    worst = float(np.max(ss_max[0]))
    targets.append(
        ("selective_scan numba largest tensor / one (B,D,L,N) tensor", "< 1", worst / bdln_bytes, worst < bdln_bytes)
    )
    peak = float(ss_peak[0, 0])
    targets.append(
        ("selective_scan numba fwd peak extra RSS / one (B,D,L,N)", "< 1", peak / bdln_bytes, peak < bdln_bytes)
    )

    speedup = np.empty_like(ls_med)  # baseline time / numba time (fwd: numba with out=, fwd_bwd: plain call)
    speedup[..., 0] = ls_med[..., 0] / ls_med[:, li["numba"], None, 0]
    speedup[..., 1] = ls_med[..., 1] / ls_med[:, li["numba_alloc"], None, 1]

    ds = xr.Dataset(
        {
            "bandwidth_gbs": (("threads",), [bw["1"], bw["all"]]),
            "ls_times": (("case", "impl", "mode", "repeat"), ls_times),
            "ls_time": (("case", "impl", "mode"), ls_med),
            "ls_gbs": (("case", "impl", "mode"), ls_gbs),
            "ls_pct_bandwidth": (("case", "impl", "mode"), ls_pct),
            "ls_speedup": (("case", "impl", "mode"), speedup),
            "ls_numel": (("case",), numel),
            "ls_bandwidth_gbs": (("case",), case_bw),
            "ls_shape": (("case",), ["x".join(map(str, s)) for _, s, _ in cases]),
            "ls_dim": (("case",), [d for _, _, d in cases]),
            "first_call_s": (("cache",), [first_warm, first_cold]),
            "ss_times": (("ss_impl", "mode", "ss_repeat"), ss_times),
            "ss_time": (("ss_impl", "mode"), ss_med),
            "ss_peak_extra_bytes": (("ss_impl", "mode"), ss_peak),
            "ss_max_tensor_bytes": (("ss_impl", "mode"), ss_max),
            "ssd_times": (("ssd_impl", "mode", "repeat"), ssd_times),
            "ssd_time": (("ssd_impl", "mode"), ssd_med),
            "target_goal": (("target",), [t[1] for t in targets]),
            "target_measured": (("target",), [t[2] for t in targets]),
            "target_passed": (("target",), [bool(t[3]) for t in targets]),
        },
        coords={
            "threads": ["1", "all"],
            "case": case_names,
            "impl": list(_LS_IMPLS),
            "mode": list(_MODES),
            "repeat": np.arange(max_rep),
            "cache": ["warm", "cold"],
            "ss_impl": list(ss_impls),
            "ss_repeat": np.arange(ss_rep),
            "ssd_impl": list(ssd_impls),
            "target": [t[0] for t in targets],
        },
        attrs={
            "title": "scan kernels benchmark",
            "quick": int(quick),
            "machine": _machine(),
            "numba_threads": int(numba.config.NUMBA_NUM_THREADS),
            "torch_threads": int(torch.get_num_threads()),
            "ss_sizes": "batch, channels, length, state = " + ", ".join(map(str, ss_sizes)),
            "ss_bdln_bytes": int(bdln_bytes),
            "ssd_sizes": "batch, length, heads, headdim, state = " + ", ".join(map(str, ssd_sizes)),
            "ssd_chunk": int(ssd_chunk),
            "total_seconds": round(time.perf_counter() - t_start, 1),
            "malloc_reuse": int(malloc_tuned),
            "description": (
                "times in seconds (median over repeats; caches flushed before each). bandwidth_gbs: numba "
                "out=a*b+b over the scan's arrays (12 B/element), 1 thread and all. ls_*: linear_scan float32; impl "
                "numba = linear_scan(out=preallocated), numba_alloc = plain call (allocates its output), "
                "torch_loop = Python loop of addcmul in (T, ...) layout (autograd for fwd_bwd), pscan = Blelloch "
                "scan in torch, jax = jax.lax.associative_scan (NaN when jax is absent); implementations are timed "
                "in turns (round robin) so that load changes hit all alike. ls_gbs counts 12 B/element fwd and 32 "
                "fwd_bwd; ls_pct_bandwidth is against ls_bandwidth_gbs, the numba out=a*b+b bandwidth on that "
                "case's own arrays measured in the same rounds (all threads); ls_speedup = impl time / numba "
                "time (fwd: numba with out=, fwd_bwd: numba_alloc). ss_*: selective_scan (softplus, D, z) numba vs "
                "selective_scan_ref; ss_peak_extra_bytes = rise of peak RSS during the calls in a fresh subprocess, "
                "ss_max_tensor_bytes = largest single tensor returned by any torch op during one call. "
                "ssd_*: chunked ssd vs sequential ssd_ref. malloc_reuse: kernels.reuse_freed_memory() was in effect "
                "(freed large buffers are reused instead of page-faulted afresh). first_call_s: first "
                "forward+backward in a new process with numba's cache warm / empty (compile). Shared, noisy "
                "machine: expect +-20%."
            ),
        },
    )
    _log(progress, f"done in {time.perf_counter() - t_start:.1f} s")
    return ds


def _nanmedian(x: np.ndarray) -> np.ndarray:
    """Median over the last axis ignoring NaN padding; NaN where nothing was measured."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmedian(x, axis=-1)


def _machine() -> str:
    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} logical CPUs, torch {torch.__version__}"


# ----------------------------------------------------------------------------------------------------------------
def format_scan_bench(ds) -> str:
    """Format a :func:`run_scan_bench` Dataset as plain-text tables (targets last, with pass/fail)."""
    lines = []
    q = " (quick: shapes shrunk, numbers not meaningful)" if int(ds.attrs.get("quick", 0)) else ""
    lines.append(f"scan benchmark{q} -- {ds.attrs.get('machine', '')}")
    if int(ds.attrs.get("malloc_reuse", 0)):
        lines.append(
            "(kernels.reuse_freed_memory() in effect: freed large buffers are reused, not page-faulted afresh)"
        )
    bw = ds["bandwidth_gbs"].values
    lines.append(f"bandwidth (numba out=a*b+b, 12 B/el): 1 thread {bw[0]:.1f} GB/s, all threads {bw[1]:.1f} GB/s")
    fc = ds["first_call_s"].values
    lines.append(
        f"first linear_scan fwd+bwd in a new process: {fc[0]:.2f} s (numba cache warm), {fc[1]:.1f} s (cold)"
    )
    lines.append("")
    lines.append(
        "linear_scan float32 (ms; GB/s at 12 B/el fwd, 32 B/el fwd+bwd; % of bw = the case's own out=a*b+b "
        "bandwidth, timed in the same rounds; xN = numba speed-up)"
    )
    hdr = f"{'case':<16} {'shape':<14} {'bw GB/s':>7} {'mode':<8} " + " ".join(f"{i:>22}" for i in ds["impl"].values)
    lines.append(hdr)
    for c in ds["case"].values:
        for m in ds["mode"].values:
            cells = []
            for i in ds["impl"].values:
                t = float(ds["ls_time"].sel(case=c, impl=i, mode=m))
                if math.isnan(t):
                    cells.append(f"{'-':>22}")
                    continue
                gbs = float(ds["ls_gbs"].sel(case=c, impl=i, mode=m))
                pct = float(ds["ls_pct_bandwidth"].sel(case=c, impl=i, mode=m))
                sp = float(ds["ls_speedup"].sel(case=c, impl=i, mode=m))
                cell = f"{t * 1e3:.1f}ms {gbs:.1f}GB/s {pct:.0f}%"
                if i not in ("numba", "numba_alloc"):
                    cell += f" x{sp:.0f}"
                cells.append(f"{cell:>22}")
            shape = str(ds["ls_shape"].sel(case=c).values)
            cbw = float(ds["ls_bandwidth_gbs"].sel(case=c))
            lines.append(f"{c:<16} {shape:<14} {cbw:>7.1f} {m:<8} " + " ".join(cells))
    lines.append("")
    lines.append(f"selective_scan ({ds.attrs.get('ss_sizes')}; one (B,D,L,N) float32 tensor = "
                 f"{ds.attrs.get('ss_bdln_bytes', 0) / 2**20:.0f} MiB)")  # fmt: skip
    for i in ds["ss_impl"].values:
        parts = []
        for m in ds["mode"].values:
            t = float(ds["ss_time"].sel(ss_impl=i, mode=m))
            pk = float(ds["ss_peak_extra_bytes"].sel(ss_impl=i, mode=m)) / 2**20
            mx = float(ds["ss_max_tensor_bytes"].sel(ss_impl=i, mode=m)) / 2**20
            parts.append(f"{m} {t * 1e3:.1f} ms (peak RSS +{pk:.0f} MiB, largest tensor {mx:.0f} MiB)")
        lines.append(f"  {i:<8} " + ", ".join(parts))
    sp = ds["ss_time"].sel(ss_impl="ref") / ds["ss_time"].sel(ss_impl="numba")
    lines.append(
        f"  numba speed-up: fwd x{float(sp.sel(mode='fwd')):.0f}, fwd+bwd x{float(sp.sel(mode='fwd_bwd')):.0f}"
    )
    lines.append("")
    lines.append(f"ssd ({ds.attrs.get('ssd_sizes')}, chunk {ds.attrs.get('ssd_chunk')})")
    for i in ds["ssd_impl"].values:
        parts = [f"{m} {float(ds['ssd_time'].sel(ssd_impl=i, mode=m)) * 1e3:.1f} ms" for m in ds["mode"].values]
        lines.append(f"  {i:<11} " + ", ".join(parts))
    sp = ds["ssd_time"].sel(ssd_impl="sequential") / ds["ssd_time"].sel(ssd_impl="chunked")
    lines.append(
        f"  chunked speed-up: fwd x{float(sp.sel(mode='fwd')):.1f}, fwd+bwd x{float(sp.sel(mode='fwd_bwd')):.1f}"
    )
    lines.append("")
    lines.append("targets")
    for t, goal, val, ok in zip(
        ds["target"].values, ds["target_goal"].values, ds["target_measured"].values, ds["target_passed"].values
    ):
        lines.append(f"  {'PASS' if ok else 'FAIL'}  {t:<62} goal {goal:<6} measured {float(val):.2f}")
    lines.append(f"(total {ds.attrs.get('total_seconds')} s; shared machine, timings noisy)")
    return "\n".join(lines)
