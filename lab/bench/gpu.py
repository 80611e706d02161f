"""``lab bench gpu``: the compiled GPU kernels checked against the torch references, then timed.

One prepared command for a lent device machine (``lab bench gpu``): on a CUDA device it

1. checks every Triton kernel against its torch reference in float32: ``linear_scan`` forward and backward in both
   layouts and **reversed** (the interpreter cannot show compiled reverse-scan behaviour), ``selective_scan``
   forward and backward with ``D``, ``z``, bias, softplus and an initial state, at a state size of 64 (a tile that
   used to spill) and at sizes whose ``batch * channels * length`` passes 2^31 when the device has the memory
   (64-bit offsets);
2. times them against a device-to-device copy of the same bytes (the bandwidth bound) and against the peers that
   install there: ``mamba_ssm``'s ``selective_scan_fn``, ``accelerated_scan``'s ``scan`` and
   ``flash-linear-attention``'s ``chunk_delta_rule`` (against :func:`kernels.delta_rule`).

On a machine without a CUDA device it says so and returns a Dataset with ``device = "none"`` (the command exits 0).
"""

from __future__ import annotations

import time

import numpy as np
import torch
import xarray as xr

__all__ = ["format_gpu_bench", "run_gpu_bench"]


def _rel(out: torch.Tensor, ref: torch.Tensor) -> float:
    scale = float(ref.abs().max()) or 1.0
    return float((out.float() - ref.float()).abs().max()) / scale


def _cuda_time(fn, repeats: int = 10) -> float:
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return float(np.median(times))


def _checks(dev) -> list[tuple[str, float, float]]:
    """(case, relative error, tolerance) of every compiled kernel against its reference."""
    from kernels import linear_scan, selective_scan

    out = []
    g = torch.Generator(device="cpu").manual_seed(0)
    for layout in ("time_last", "channels_last"):
        for reverse in (False, True):
            shape = (4, 256, 4096) if layout == "time_last" else (4, 4096, 256)
            dim = -1 if layout == "time_last" else 1
            a = (torch.rand(*shape, generator=g) * 0.98).to(dev).requires_grad_()
            b = torch.randn(*shape, generator=g).to(dev).requires_grad_()
            h = linear_scan(a, b, dim=dim, reverse=reverse, backend="triton")
            (h * h).sum().backward()
            ga, gb = a.grad.clone(), b.grad.clone()
            a.grad = b.grad = None
            r = linear_scan(a, b, dim=dim, reverse=reverse, backend="torch")
            (r * r).sum().backward()
            tag = f"linear_scan {layout}{' reverse' if reverse else ''}"
            out += [(f"{tag} fwd", _rel(h, r), 1e-5), (f"{tag} da", _rel(ga, a.grad), 1e-4),
                    (f"{tag} db", _rel(gb, b.grad), 1e-4)]
    for state in (16, 64):
        bsz, dim_, length = 2, 256, 1024
        mk = lambda *s: torch.randn(*s, generator=g).to(dev)  # noqa: E731
        u, delta, z = mk(bsz, dim_, length), mk(bsz, dim_, length), mk(bsz, dim_, length)
        A = (-torch.rand(dim_, state, generator=g)).to(dev)
        B, C = mk(bsz, state, length), mk(bsz, state, length)
        D, bias, h0 = mk(dim_), mk(dim_), mk(bsz, dim_, state)
        leaves = [t.clone().requires_grad_() for t in (u, delta, A, B, C, D, bias, h0)]
        refs = [t.clone().requires_grad_() for t in (u, delta, A, B, C, D, bias, h0)]
        kw = dict(delta_softplus=True, return_last_state=True)
        y, last = selective_scan(*leaves[:6], z, leaves[6], h0=leaves[7], backend="triton", **kw)
        yr, lr = selective_scan(*refs[:6], z, refs[6], h0=refs[7], backend="torch", **kw)
        (y.square().sum() + last.sum()).backward()
        (yr.square().sum() + lr.sum()).backward()
        out.append((f"selective_scan N={state} fwd", _rel(y, yr), 1e-4))
        for name, a_, r_ in zip(("du", "ddelta", "dA", "dB", "dC", "dD", "dbias", "dh0"), leaves, refs):
            out.append((f"selective_scan N={state} {name}", _rel(a_.grad, r_.grad), 1e-3))
    free, _ = torch.cuda.mem_get_info()
    if free > 40 * 2**30:  # 2^31 elements of float32 a and b, plus the output: 24 GiB
        n = 2**31 + 4096
        a = torch.full((1, 1, n), 0.5, device=dev)
        b = torch.ones(1, 1, n, device=dev)
        h = linear_scan(a, b, backend="triton")
        out.append(("linear_scan 2^31+ elements (64-bit offsets)", abs(float(h[0, 0, -1]) - 2.0), 1e-5))
        del a, b, h
    return out


def _timings(dev) -> dict[str, float]:
    from kernels import delta_rule, linear_scan, selective_scan

    t: dict[str, float] = {}
    a = torch.rand(16, 256, 8192, device=dev) * 0.98
    b = torch.randn(16, 256, 8192, device=dev)
    dst = torch.empty_like(b)
    t["copy 3x (a, b -> h bytes)"] = _cuda_time(lambda: (dst.copy_(b), dst.copy_(a), dst.copy_(b)))
    t["linear_scan triton"] = _cuda_time(lambda: linear_scan(a, b, backend="triton"))
    try:
        from accelerated_scan.warp import scan as warp_scan

        t["accelerated_scan warp"] = _cuda_time(lambda: warp_scan(a.contiguous(), b.contiguous()))
    except Exception:  # noqa: BLE001 - not installed, or no kernel for this device
        pass
    u = torch.randn(4, 1536, 2048, device=dev)
    delta = torch.rand(4, 1536, 2048, device=dev)
    A = -torch.rand(1536, 16, device=dev)
    B, C = torch.randn(4, 16, 2048, device=dev), torch.randn(4, 16, 2048, device=dev)
    t["selective_scan triton"] = _cuda_time(lambda: selective_scan(u, delta, A, B, C, backend="triton"))
    try:
        from mamba_ssm.ops.selective_scan_interface import selective_scan_fn

        t["mamba_ssm selective_scan_fn"] = _cuda_time(lambda: selective_scan_fn(u, delta, A, B, C))
    except Exception:  # noqa: BLE001
        pass
    q = torch.nn.functional.normalize(torch.randn(4, 8, 2048, 64, device=dev), dim=-1)
    k = torch.nn.functional.normalize(torch.randn(4, 8, 2048, 64, device=dev), dim=-1)
    v = torch.randn(4, 8, 2048, 64, device=dev)
    beta = torch.rand(4, 8, 2048, device=dev)
    t["delta_rule chunked (torch)"] = _cuda_time(lambda: delta_rule(q, k, v, beta))
    try:
        from fla.ops.delta_rule import chunk_delta_rule

        qf, kf, vf = (x.transpose(1, 2).contiguous() for x in (q, k, v))  # fla: (batch, length, heads, dim)
        t["fla chunk_delta_rule"] = _cuda_time(lambda: chunk_delta_rule(qf, kf, vf, beta.transpose(1, 2)))
    except Exception:  # noqa: BLE001
        pass
    return t


def run_gpu_bench(quick: bool = False, progress: bool = True) -> xr.Dataset:
    """The checks and timings (module docstring); on a machine without CUDA, a Dataset saying so."""
    if not torch.cuda.is_available():
        if progress:
            print("no CUDA device here: nothing to check (run this on a machine with a GPU)")
        return xr.Dataset(attrs={"device": "none", "note": "no CUDA device"})
    dev = torch.device("cuda")
    start = time.perf_counter()
    checks = _checks(dev)
    timings = {} if quick else _timings(dev)
    ds = xr.Dataset(
        {
            "rel_error": (("check",), [c[1] for c in checks], {"long_name": "relative error", "units": "1"}),
            "tolerance": (("check",), [c[2] for c in checks], {"long_name": "tolerance", "units": "1"}),
            "seconds": (("timing",), list(timings.values()) or [np.nan],
                        {"long_name": "median time", "units": "s"}),
        },
        coords={"check": [c[0] for c in checks], "timing": list(timings) or ["none"]},
        attrs={"device": torch.cuda.get_device_name(dev), "torch": torch.__version__,
               "wall_s": time.perf_counter() - start},
    )
    return ds


def format_gpu_bench(ds: xr.Dataset) -> str:
    """The table ``lab bench gpu`` prints."""
    if ds.attrs.get("device") == "none":
        return "lab bench gpu: no CUDA device on this machine; nothing was checked (exit 0)."
    lines = [f"device: {ds.attrs['device']} (torch {ds.attrs['torch']})",
             "checks (relative error vs torch reference)"]
    for name, err, tol in zip(ds.check.values, ds.rel_error.values, ds.tolerance.values):
        lines.append(f"  {'PASS' if err <= tol else 'FAIL'}  {name:<48} {err:.2e}  (tol {tol:.0e})")
    if ds.timing.size and ds.timing.values[0] != "none":
        lines.append("timings (median)")
        for name, sec in zip(ds.timing.values, ds.seconds.values):
            lines.append(f"  {name:<32} {sec * 1e3:9.3f} ms")
    return "\n".join(lines)
