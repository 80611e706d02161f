"""HoloViews plots of the SSM-INR results (notebook ``11_ssm_inr``, dashboard ``compact_models``), and the notebook's
discussion built from the Dataset."""

from __future__ import annotations

import holoviews as hv
import numpy as np
import xarray as xr

from lab.viz.bands import spread_text
from lab.viz.style import PALETTE, curve_opts

LABELS = {"lpnet_s3k": "LPNet-S3K", "lpnet_conv": "LPNet-Conv", "lpnet_conv_b": "LPNet-Conv (2nd seed)",
          "lpnet_mamba": "LPNet-Mamba", "s3k_flat": "S3K, no pyramid", "s3k_image_pyramid": "S3K, image pyramid",
          "s3k_stacked": "S3K stacked x2", "mamba_flat": "Mamba, no pyramid",
          "mamba_image_pyramid": "Mamba, image pyramid", "convnext": "ConvNeXt", "siren": "SIREN"}
COLOURS = {v: PALETTE[i % len(PALETTE)] for i, v in enumerate(LABELS)}
SIDE = 220


def image(rgb: np.ndarray, title: str) -> hv.RGB:
    """An RGB image ``(3, H, W)`` in [0, 1]."""
    arr = np.clip(np.asarray(rgb, float), 0, 1).transpose(1, 2, 0)[::-1]  # hv's y axis points up
    return hv.RGB(arr, bounds=(0, 0, arr.shape[1], arr.shape[0])).opts(
        title=title, width=SIDE, height=SIDE, xaxis=None, yaxis=None, toolbar=None)


def error_map(original: np.ndarray, recon: np.ndarray, title: str) -> hv.Image:
    """Absolute error averaged over the channels, ``(3, H, W)`` inputs."""
    err = np.abs(np.asarray(original, float) - np.asarray(recon, float)).mean(0)[::-1]
    return hv.Image(err, bounds=(0, 0, err.shape[1], err.shape[0]), vdims="|error|").opts(
        title=title, cmap="magma", colorbar=True, clim=(0, max(float(err.max()), 1e-3)), width=SIDE + 60,
        height=SIDE, xaxis=None, yaxis=None, toolbar=None, tools=["hover"])


def pyramid_level(level: np.ndarray, index: int, last: bool) -> hv.Image:
    """One pyramid level ``(3, h, w)``: the band-pass levels as grey detail, the low-pass as colour."""
    if last:
        return image(level, f"level {index}: low-pass ({level.shape[-1]}²)")
    detail = np.asarray(level, float).mean(0)[::-1]
    lim = max(float(np.abs(detail).max()), 1e-3)
    return hv.Image(detail, bounds=(0, 0, detail.shape[1], detail.shape[0]), vdims="detail").opts(
        title=f"level {index}: band-pass ({level.shape[-1]}²)", cmap="RdBu_r", clim=(-lim, lim), width=SIDE,
        height=SIDE, xaxis=None, yaxis=None, toolbar=None)


def reconstructions(ds: xr.Dataset, variants=("lpnet_s3k", "lpnet_conv", "convnext", "siren")) -> hv.Layout:
    """The first datum's first frame, each variant's reconstruction and its error map."""
    orig = ds.original.isel(frame=0).values
    items = [image(orig, f"original ({ds.attrs['first_datum']})")]
    for v in variants:
        rec = ds.reconstruction.sel(variant=v).isel(frame=0).values
        p = float(ds.psnr.sel(variant=v).isel(datum=0, seed=0))
        items += [image(rec, f"{LABELS[v]} {p:.2f} dB"), error_map(orig, rec, f"{LABELS[v]} error")]
    return hv.Layout(items).cols(3)


def psnr_bars(ds: xr.Dataset) -> hv.Overlay:
    """PSNR of every variant at the claim budget: the mean over data x seeds and each (datum, seed) as a point."""
    variants = list(ds.variant.values)
    labels = [LABELS[v] for v in variants]
    means = [float(ds.psnr.sel(variant=v).mean()) for v in variants]
    bars = hv.Bars(list(zip(labels, means)), "variant", "PSNR (dB)").opts(
        color="#cfd8e3", line_color="#1f5fa8", xrotation=40, tools=["hover"])
    pts = [(LABELS[v], float(p)) for v in variants for p in ds.psnr.sel(variant=v).values.ravel()]
    lo = min(p for _, p in pts)
    return (bars * hv.Scatter(pts, "variant", "PSNR (dB)").opts(color="black", size=6, jitter=0.3)).opts(
        title=f"PSNR at {ds.attrs['budget']} parameters (bar: mean; points: data x seeds)", width=760, height=380,
        ylim=(lo - 2, None), show_grid=True)


def rd_curves(rows: dict[str, tuple[np.ndarray, np.ndarray]], title: str = "PSNR against size") -> hv.Overlay:
    """PSNR against parameters per variant: ``rows[variant] = (params, psnr)``."""
    items = []
    for v, (x, y) in rows.items():
        order = np.argsort(x)
        items.append(hv.Curve((np.asarray(x)[order], np.asarray(y)[order]), "parameters", "PSNR (dB)",
                              label=LABELS.get(v, v)).opts(color=COLOURS.get(v, "black")))
        items.append(hv.Scatter((x, y), "parameters", "PSNR (dB)", label=LABELS.get(v, v)).opts(
            color=COLOURS.get(v, "black"), size=8, tools=["hover"]))
    return hv.Overlay(items).opts(title=title, logx=True, legend_position="bottom_right", **curve_opts())


def rate_distortion(ds: xr.Dataset) -> hv.Overlay:
    """The run's rate-distortion curve (first datum, first seed)."""
    rows = {v: (ds.rd_params.sel(rd_variant=v).values, ds.rd_psnr.sel(rd_variant=v).values)
            for v in ds.rd_variant.values}
    return rd_curves(rows, f"PSNR against size ({ds.attrs['first_datum']})")


def loss_curves(ds: xr.Dataset) -> hv.Overlay:
    """Training MSE of each variant on the first datum and seed."""
    items = [hv.Curve((ds.point.values, ds.loss.sel(variant=v).isel(datum=0, seed=0).values), "training step",
                      "MSE", label=LABELS[v]).opts(color=COLOURS[v]) for v in ds.variant.values]
    return hv.Overlay(items).opts(title=f"training loss ({ds.attrs['first_datum']})", logy=True,
                                  legend_position="top_right", **curve_opts(width=700))


def discussion(ds: xr.Dataset) -> str:
    """The notebook's discussion as Markdown, every number taken from the run's Dataset."""
    def gap(a, b):
        return spread_text((ds.psnr.sel(variant=a) - ds.psnr.sel(variant=b)).values, "+.2f", prefix="from")

    dev = float(np.abs(ds.params / ds.attrs["budget"] - 1).max())
    best = max(ds.variant.values, key=lambda v: float(ds.psnr.sel(variant=v).mean()))
    n = ds.sizes["datum"] * ds.sizes["seed"]
    return "\n".join([
        f"- **Sizes.** Every model has {ds.attrs['budget']} parameters within {dev:.1%} (recorded in "
        f"`ds.params`); the LPNet variants share the decoder and the latent grid "
        f"({ds.attrs['latent_channels']} channels at 1/{ds.attrs['factor']} of the side).",
        f"- **S3K against a plain conv** (dB, mean over {n} fits, then the range): {gap('lpnet_s3k', 'lpnet_conv')};"
        f" two LPNet-Conv seeds differ by {gap('lpnet_conv_b', 'lpnet_conv')}.",
        f"- **The pyramid**: S3K Laplacian minus flat {gap('lpnet_s3k', 's3k_flat')}, image pyramid minus flat "
        f"{gap('s3k_image_pyramid', 's3k_flat')}; Mamba Laplacian minus flat {gap('lpnet_mamba', 'mamba_flat')}, "
        f"image pyramid minus flat {gap('mamba_image_pyramid', 'mamba_flat')}.",
        f"- **Stacking** two S3K layers minus one: {gap('s3k_stacked', 's3k_flat')}.",
        f"- **Best at this size**: {LABELS[best]} ({float(ds.psnr.sel(variant=best).mean()):.2f} dB). SIREN has no "
        "latent to store and no bottleneck but its parameters; the LPNet models must also pass the datum through "
        "the latent grid, whose values (`ds.stored`) are part of what a decoder needs.",
    ])
