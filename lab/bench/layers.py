"""``lab bench layers``: the lab's SSM blocks against mambapy, side by side in one run.

The lab's Mamba, Mamba-2 and LRU layers (:mod:`lab.core.ssm`, on the scan kernels) and mambapy's ``MambaBlock`` (the
pure-PyTorch Mamba on PyPI, a CPU user's choice: its parallel scan, ``pscan=True``) on the same shapes: forward
tokens per second (inference, no autograd) and training tokens per second (forward and backward of a scalar loss).
Each case is timed as the median of repeated calls after a warm-up, the layers of a mode in turns (one call of each
per round), so that machine load that comes and goes during the run moves every layer alike; ratios are measured in
the same run.

Every layer runs on one thread (torch, Numba and BLAS, :func:`lab.core.runtime.threads`), the lab's setting for
these model sizes. With torch's default threads on a 2-core machine shared with other jobs, OpenMP's barrier waits in
mambapy's large element-wise ops made its speed swing 5x between runs (7.5k to 36k forward tokens per second) and the
ratios with it (3x to 20x forward); one thread has no barriers, so what remains is the load itself, which slows both
sides.
"""

from __future__ import annotations

import statistics
import time

import numpy as np
import torch
import xarray as xr

__all__ = ["format_layers_bench", "run_layers_bench"]

FULL = dict(batch=8, length=1024, d_model=128, d_state=16)
QUICK = dict(batch=2, length=128, d_model=32, d_state=8)
LAYERS = ("lab_mamba", "lab_mamba2", "lab_lru", "mambapy")
MODES = ("forward", "train")
THREADS = 1  # torch, Numba and BLAS threads of every layer (see the module docstring)


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
    """Tokens per second of each layer, forward and training; ratios against mambapy in the attrs.

    Arguments:
        quick: small shapes (a smoke run in seconds). progress: print each case as it is measured.
    """
    from lab.core.runtime import threads

    with threads(THREADS):
        return _run(quick, progress)


def _run(quick: bool, progress: bool) -> xr.Dataset:
    shape = QUICK if quick else FULL
    repeats, budget = (2, 1.0) if quick else (5, 6.0)
    torch.manual_seed(0)
    x = torch.randn(shape["batch"], shape["length"], shape["d_model"])
    tokens = shape["batch"] * shape["length"]
    tps = np.full((len(LAYERS), len(MODES)), np.nan)
    calls: list[dict] = [{}, {}]  # per mode: {layer name: fn}
    for name in LAYERS:
        layer = _build(name, shape["d_model"], shape["d_state"])
        if layer is None:
            continue
        xg = x.clone().requires_grad_()

        def forward(layer=layer):
            with torch.no_grad():
                layer(x)

        def train(layer=layer, xg=xg):
            layer.zero_grad(set_to_none=True)
            layer(xg).square().mean().backward()

        calls[0][name], calls[1][name] = forward, train
    for j, fns in enumerate(calls):
        for name, sec in time_in_turns(fns, repeats, budget).items():
            tps[LAYERS.index(name), j] = tokens / sec
            if progress:
                print(f"  {name:<11} {MODES[j]:<8} {tps[LAYERS.index(name), j]:>12,.0f} tokens/s", flush=True)
    ds = xr.Dataset(
        {"tokens_per_s": (("layer", "mode"), tps, {"long_name": "tokens per second", "units": "1/s"})},
        coords={"layer": list(LAYERS), "mode": list(MODES)},
        attrs={**{k: int(v) for k, v in shape.items()}, "torch_threads": torch.get_num_threads(),
               "quick": int(quick)},
    )
    base = ds.tokens_per_s.sel(layer="mambapy")
    for name in LAYERS[:-1]:
        for mode in MODES:
            ratio = ds.tokens_per_s.sel(layer=name, mode=mode) / base.sel(mode=mode)
            ds.attrs[f"{name}_{mode}_x_mambapy"] = float(ratio)
    return ds


def format_layers_bench(ds: xr.Dataset) -> str:
    """The table ``lab bench layers`` prints."""
    a = ds.attrs
    lines = [f"layers (batch {a['batch']}, length {a['length']}, d_model {a['d_model']}, state {a['d_state']}; "
             f"torch threads {a['torch_threads']}): tokens per second, and x mambapy in the same run",
             f"{'layer':<12}{'forward':>14}{'x mambapy':>11}{'train':>14}{'x mambapy':>11}"]
    base = ds.tokens_per_s.sel(layer="mambapy")
    for name in ds.layer.values:
        row = ds.tokens_per_s.sel(layer=name)
        cells = []
        for mode in MODES:
            value, ref = float(row.sel(mode=mode)), float(base.sel(mode=mode))
            cells.append(f"{value:>14,.0f}{value / ref if np.isfinite(ref) else float('nan'):>10.2f}x")
        lines.append(f"{name:<12}" + "".join(cells))
    if not np.isfinite(base.values).all():
        lines.append("mambapy is not installed: pip install mambapy (the dev extra has it)")
    return "\n".join(lines)
