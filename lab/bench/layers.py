"""``lab bench layers``: the lab's SSM blocks against mambapy, side by side in one run.

The lab's Mamba, Mamba-2 and LRU layers (:mod:`lab.core.ssm`, on the scan kernels) and mambapy's ``MambaBlock`` (the
pure-PyTorch Mamba on PyPI, a CPU user's choice: its parallel scan, ``pscan=True``) on the same shapes: forward
tokens per second (inference, no autograd) and training tokens per second (forward and backward of a scalar loss).
Each case is timed as the median of repeated calls after a warm-up, the layers of a mode in turns (one call of each
per round), so that machine load that comes and goes during the run moves every layer alike; ratios are measured in
the same run.

Every layer runs first on one thread (torch, Numba and BLAS, :func:`lab.core.runtime.threads`), the lab's setting
for these model sizes, then at torch's default threads (the cores), which users run at. With the default threads on a
2-core machine shared with other jobs, OpenMP's barrier waits in mambapy's large element-wise ops made its speed swing
5x between runs (7.5k to 36k forward tokens per second) and the ratios with it (3x to 20x forward); one thread has
no barriers, so what remains is the load itself, which slows both sides.

Beside the blocks, the matrix products of the lab's Mamba and Mamba-2 blocks alone (``*_gemms``: every ``nn.Linear``
of the block on its input's shape; training also their two backward products) are timed in the same turns: the work a
block cannot avoid, so that ``x own GEMMs`` (the block's time over them) says how close it runs to that floor.
"""

from __future__ import annotations

import statistics
import time

import numpy as np
import torch
import xarray as xr

__all__ = ["GEMMS", "LAYERS", "format_layers_bench", "gemm_calls", "run_layers_bench", "time_in_turns"]

FULL = dict(batch=8, length=1024, d_model=128, d_state=16)
QUICK = dict(batch=2, length=128, d_model=32, d_state=8)
LAYERS = ("lab_mamba", "lab_mamba2", "lab_lru", "mambapy")
#: the matrix products alone of a block: row name -> the block's
GEMMS = {"lab_mamba_gemms": "lab_mamba", "lab_mamba2_gemms": "lab_mamba2"}
MODES = ("forward", "train")
THREADS = 1  # torch, Numba and BLAS threads of the first measurement (see the module docstring)


def _build(name: str, d_model: int, d_state: int) -> torch.nn.Module | None:
    from lab.core.ssm import LRU, Mamba, Mamba2

    if name == "lab_mamba":
        return Mamba(d_model, d_state)
    if name == "lab_mamba2":
        return Mamba2(d_model, d_state)
    if name == "lab_lru":
        return LRU(d_model, d_state)
    try:
        from mambapy.mamba import MambaBlock, MambaConfig
    except ImportError:
        return None
    return MambaBlock(MambaConfig(d_model=d_model, n_layers=1, d_state=d_state, pscan=True))


def gemm_calls(layer: torch.nn.Module, tokens: int):
    """``(forward, train)``: every ``nn.Linear`` of ``layer`` applied to a random input of ``tokens`` rows (its
    weights, no other work); ``train`` also runs their backward products (the input's and the weight's gradient)."""
    import torch.nn.functional as F

    linears = [m for m in layer.modules() if isinstance(m, torch.nn.Linear)]
    inputs = [torch.randn(tokens, m.in_features) for m in linears]
    grads = [torch.randn(tokens, m.out_features) for m in linears]

    def forward():
        with torch.no_grad():
            for m, x in zip(linears, inputs):
                F.linear(x, m.weight, m.bias)

    def train():
        for m, x, g in zip(linears, inputs, grads):
            m.zero_grad(set_to_none=True)
            F.linear(x.requires_grad_(), m.weight, m.bias).backward(g)
            x.grad = None

    return forward, train


def time_in_turns(fns: dict, repeats: int, budget: float) -> dict[str, float]:
    """Median seconds per call of each function, timed in turns (one call of each per round), so that a change in
    the machine's load between rounds hits every layer alike. Rounds continue until each function has ``repeats``
    calls and ``budget`` seconds per function have passed (at most ``5 * repeats`` rounds)."""
    for fn in fns.values():
        fn()  # warm-up (first calls compile or allocate)
    times: dict[str, list[float]] = {name: [] for name in fns}
    deadline = time.perf_counter() + budget * len(fns)
    for _ in range(5 * repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
        if len(times[name]) >= repeats and time.perf_counter() > deadline:
            break
    return {name: statistics.median(ts) for name, ts in times.items()}


def run_layers_bench(quick: bool = False, progress: bool = True) -> xr.Dataset:
    """Tokens per second of each layer (and of the Mamba blocks' matrix products alone), forward and training, at one
    thread and at torch's default threads; ratios against mambapy and against the block's own products in the attrs
    (``{layer}_{mode}_x_mambapy`` and ``{block}_{mode}_x_gemms`` at one thread, the same with ``_default_threads``).

    Arguments:
        quick: small shapes (a smoke run in seconds). progress: print each case as it is measured.
    """
    from lab.core.runtime import threads

    default = torch.get_num_threads()
    settings = [THREADS] + ([default] if default != THREADS else [])
    parts = []
    for n in settings:
        if progress:
            print(f"torch threads {n}:", flush=True)
        with threads(n):
            parts.append(_run(quick, progress))
    ds = xr.concat(parts, xr.DataArray(settings, dims="threads", name="threads"), combine_attrs="override")
    ds.attrs["torch_threads"] = THREADS
    ds.attrs["default_threads"] = default
    for k, n in enumerate(settings):
        suffix = "" if n == THREADS else "_default_threads"
        tps = ds.tokens_per_s.isel(threads=k)
        for mode in MODES:
            for name in LAYERS[:-1]:
                ds.attrs[f"{name}_{mode}_x_mambapy{suffix}"] = float(tps.sel(layer=name, mode=mode)
                                                                      / tps.sel(layer="mambapy", mode=mode))
            for gemm, block in GEMMS.items():  # a block's time over its products' (tokens/s the other way round)
                ds.attrs[f"{block}_{mode}_x_gemms{suffix}"] = float(tps.sel(layer=gemm, mode=mode)
                                                                     / tps.sel(layer=block, mode=mode))
    return ds


def _run(quick: bool, progress: bool) -> xr.Dataset:
    shape = QUICK if quick else FULL
    repeats, budget = (2, 1.0) if quick else (5, 6.0)
    torch.manual_seed(0)
    x = torch.randn(shape["batch"], shape["length"], shape["d_model"])
    tokens = shape["batch"] * shape["length"]
    names = LAYERS + tuple(GEMMS)
    tps = np.full((len(names), len(MODES)), np.nan)
    calls: list[dict] = [{}, {}]  # per mode: {layer name: fn}
    blocks = {}
    for name in LAYERS:
        layer = _build(name, shape["d_model"], shape["d_state"])
        if layer is None:
            continue
        blocks[name] = layer
        xg = x.clone().requires_grad_()

        def forward(layer=layer):
            with torch.no_grad():
                layer(x)

        def train(layer=layer, xg=xg):
            layer.zero_grad(set_to_none=True)
            layer(xg).square().mean().backward()

        calls[0][name], calls[1][name] = forward, train
    for gemm, block in GEMMS.items():
        calls[0][gemm], calls[1][gemm] = gemm_calls(blocks[block], tokens)
    for j, fns in enumerate(calls):
        for name, sec in time_in_turns(fns, repeats, budget).items():
            tps[names.index(name), j] = tokens / sec
            if progress:
                print(f"  {name:<16} {MODES[j]:<8} {tps[names.index(name), j]:>12,.0f} tokens/s", flush=True)
    return xr.Dataset(
        {"tokens_per_s": (("layer", "mode"), tps, {"long_name": "tokens per second", "units": "1/s"})},
        coords={"layer": list(names), "mode": list(MODES)},
        attrs={**{k: int(v) for k, v in shape.items()}, "quick": int(quick)},
    )


def format_layers_bench(ds: xr.Dataset) -> str:
    """The tables ``lab bench layers`` prints: one per thread setting."""
    a = ds.attrs
    lines = [f"layers (batch {a['batch']}, length {a['length']}, d_model {a['d_model']}, state {a['d_state']}): "
             "tokens per second, x mambapy in the same run, and each Mamba block's time over its own matrix "
             "products' (x own GEMMs: the floor is 1)"]
    for n in ds.threads.values:
        tps = ds.tokens_per_s.sel(threads=n)
        base = tps.sel(layer="mambapy")
        lines += ["", f"torch threads {int(n)}" + (" (the default)" if int(n) == a.get("default_threads") else ""),
                  f"{'layer':<18}{'forward':>12}{'x mambapy':>11}{'x GEMMs':>9}{'train':>12}{'x mambapy':>11}"
                  f"{'x GEMMs':>9}"]
        gemm_of = {block: gemm for gemm, block in GEMMS.items()}
        for name in ds.layer.values:
            cells = []
            for mode in MODES:
                value, ref = float(tps.sel(layer=name, mode=mode)), float(base.sel(mode=mode))
                x_ref = f"{value / ref:>10.2f}x" if np.isfinite(ref) and name not in GEMMS else f"{'':>11}"
                own = (f"{float(tps.sel(layer=gemm_of[name], mode=mode)) / value:>8.2f}x" if name in gemm_of
                       else f"{'':>9}")
                cells.append(f"{value:>12,.0f}{x_ref}{own}")
            lines.append(f"{name:<18}" + "".join(cells))
        if not np.isfinite(base.values).all():
            lines.append("mambapy is not installed: pip install mambapy (the dev extra has it)")
    return "\n".join(lines)
