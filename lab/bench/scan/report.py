"""Plain-text tables of a scan benchmark Dataset (targets last, with pass/fail)."""

from __future__ import annotations

import math

__all__ = ["format_scan_bench"]


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
    if "chunked_numba" in ds["ssd_impl"].values:
        sp = ds["ssd_time"].sel(ssd_impl="chunked") / ds["ssd_time"].sel(ssd_impl="chunked_numba")
        lines.append(f"  numba stages vs torch stages: fwd x{float(sp.sel(mode='fwd')):.2f}, "
                     f"fwd+bwd x{float(sp.sel(mode='fwd_bwd')):.2f}")
    lines.append("")
    lines.append("targets")
    for t, goal, val, ok in zip(
        ds["target"].values, ds["target_goal"].values, ds["target_measured"].values, ds["target_passed"].values
    ):
        lines.append(f"  {'PASS' if ok else 'FAIL'}  {t:<62} goal {goal:<6} measured {float(val):.2f}")
    lines.append(f"(total {ds.attrs.get('total_seconds')} s; shared machine, timings noisy)")
    return "\n".join(lines)
