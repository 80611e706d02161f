"""HoloViews plots of the SSM-INR results (notebook ``11_ssm_inr``, dashboard ``compact_models``), and the notebook's
discussion built from the Dataset."""

from __future__ import annotations

import holoviews as hv
import numpy as np
import xarray as xr

from lab.viz.bands import spread_text
from lab.viz.style import PALETTE, curve_opts

LABELS = {"lpnet_s3k": "LPNet-S3K", "lpnet_s3k_nodecay": "LPNet-S3K, no decays", "lpnet_conv": "LPNet-Conv",
          "lpnet_mamba": "LPNet-Mamba", "s3k_flat": "S3K, no pyramid", "s3k_image_pyramid": "S3K, image pyramid",
          "s3k_stacked": "S3K stacked x2", "mamba_flat": "Mamba, no pyramid",
          "mamba_image_pyramid": "Mamba, image pyramid", "convnext": "ConvNeXt", "siren": "SIREN"}
#: one colour per variant (PALETTE has 10 and there are 11 variants: the 11th would repeat the first)
COLOURS = dict(zip(LABELS, (*PALETTE, "#9aa33a")))
SIDE = 200


def _raster(element, title: str, side: int = SIDE, **extra):
    """Square pixels (``side`` wide), no axes; hv.Image and hv.RGB draw an array's row 0 at the top of their bounds,
    as an image is stored, so the arrays go in unflipped."""
    return element.opts(title=title, frame_width=side, data_aspect=1, xaxis=None, yaxis=None, toolbar=None,
                        **extra)


def image(rgb: np.ndarray, title: str, side: int = SIDE) -> hv.RGB:
    """An RGB image ``(3, H, W)`` in [0, 1], drawn the right way up."""
    arr = np.clip(np.asarray(rgb, float), 0, 1).transpose(1, 2, 0)
    return _raster(hv.RGB(arr, bounds=(0, 0, arr.shape[1], arr.shape[0])), title, side)


def error_map(original: np.ndarray, recon: np.ndarray, title: str, side: int = SIDE, clim: float | None = None,
              colorbar: bool = True) -> hv.Image:
    """Absolute error averaged over the channels, ``(3, H, W)`` inputs (colour scale 0 to ``clim``, by default the
    largest error)."""
    err = np.abs(np.asarray(original, float) - np.asarray(recon, float)).mean(0)
    top = clim if clim is not None else max(float(err.max()), 1e-3)
    # the colour scale as the value's range, not clim: a dashboard updating the map in place rescales to it
    value = hv.Dimension("|error|", range=(0, top))
    return _raster(hv.Image(err, bounds=(0, 0, err.shape[1], err.shape[0]), vdims=[value]), title, side,
                   cmap="magma", colorbar=colorbar, tools=["hover"], framewise=True)


def pyramid_level(level: np.ndarray, index: int, last: bool, side: int = SIDE) -> hv.Image:
    """One pyramid level ``(3, h, w)``: the band-pass levels as grey detail, the low-pass as colour."""
    if last:
        return image(level, f"level {index}: low-pass ({level.shape[-1]}²)", side)
    detail = np.asarray(level, float).mean(0)
    lim = max(float(np.abs(detail).max()), 1e-3)
    value = hv.Dimension("detail", range=(-lim, lim))  # as error_map's: the range follows a dashboard's frames
    return _raster(hv.Image(detail, bounds=(0, 0, detail.shape[1], detail.shape[0]), vdims=[value]),
                   f"level {index}: band-pass ({level.shape[-1]}²)", side, cmap="RdBu_r", framewise=True)


def reconstructions(ds: xr.Dataset, variants=("lpnet_s3k", "lpnet_conv", "convnext", "siren"),
                    side: int = 170) -> hv.Layout:
    """The first datum's first frame and each variant's reconstruction in one row, their error maps (one colour
    scale) under them."""
    orig = ds.original.isel(frame=0).values
    recs = {v: ds.reconstruction.sel(variant=v).isel(frame=0).values for v in variants}
    top = max(max(float(np.abs(orig - r).mean(0).max()) for r in recs.values()), 1e-3)
    items = [image(orig, f"original ({ds.attrs['first_datum']})", side)]
    for v, rec in recs.items():
        p = float(ds.psnr.sel(variant=v).isel(datum=0, seed=0))
        items.append(image(rec, f"{LABELS[v]}: {p:.2f} dB", side))
    items.append(hv.Empty())
    items += [error_map(orig, rec, f"{LABELS[v]} error", side, clim=top, colorbar=v == variants[-1])
              for v, rec in recs.items()]
    return hv.Layout(items).cols(len(variants) + 1)


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
        title=f"PSNR storing about {int(ds.stored.max())} numbers (budget {ds.attrs['budget']}; bar: mean; points: "
              "data x seeds)", width=760, height=380,
        ylim=(lo - 2, None), show_grid=True)


def rd_curves(rows: dict[str, tuple[np.ndarray, np.ndarray]], title: str = "PSNR against size") -> hv.Overlay:
    """PSNR against stored numbers per variant: ``rows[variant] = (stored, psnr)``."""
    items = []
    for v, (x, y) in rows.items():
        order = np.argsort(x)
        items.append(hv.Curve((np.asarray(x)[order], np.asarray(y)[order]), "stored numbers", "PSNR (dB)",
                              label=LABELS.get(v, v)).opts(color=COLOURS.get(v, "black")))
        items.append(hv.Scatter((x, y), "stored numbers", "PSNR (dB)", label=LABELS.get(v, v)).opts(
            color=COLOURS.get(v, "black"), size=8, tools=["hover"]))
    return hv.Overlay(items).opts(title=title, logx=True, legend_position="right", padding=0.08,
                                  **curve_opts(width=520))


def rate_distortion(ds: xr.Dataset) -> hv.Overlay:
    """The run's rate-distortion curve (first datum, first seed)."""
    rows = {v: (ds.rd_stored.sel(rd_variant=v).values, ds.rd_psnr.sel(rd_variant=v).values)
            for v in ds.rd_variant.values}
    return rd_curves(rows, f"PSNR against size ({ds.attrs['first_datum']})")


def steps_curve(ds: xr.Dataset) -> hv.Overlay:
    """PSNR after a whole training schedule of each length (first datum, first seed): flat at the right end when
    the run measures capacity, still rising when it measures optimisation speed."""
    items = []
    for v in ds.curve_variant.values:
        x, y = ds.step_budget.values, ds.steps_psnr.sel(curve_variant=v).values
        items.append(hv.Curve((x, y), "training steps", "PSNR (dB)", label=LABELS[v]).opts(color=COLOURS[v]))
        items.append(hv.Scatter((x, y), "training steps", "PSNR (dB)", label=LABELS[v]).opts(
            color=COLOURS[v], size=8, tools=["hover"]))
    return hv.Overlay(items).opts(title=f"PSNR against training steps ({ds.attrs['first_datum']})", logx=True,
                                  legend_position="right", padding=0.08, **curve_opts(width=520))


def loss_curves(ds: xr.Dataset) -> hv.Overlay:
    """Training MSE of each variant on the first datum and seed."""
    items = [hv.Curve((ds.point.values, ds.loss.sel(variant=v).isel(datum=0, seed=0).values), "training step",
                      "MSE", label=LABELS[v]).opts(color=COLOURS[v]) for v in ds.variant.values]
    return hv.Overlay(items).opts(title=f"training loss ({ds.attrs['first_datum']})", logy=True,
                                  legend_position="right", **curve_opts(width=600))


def discussion(ds: xr.Dataset) -> str:
    """The notebook's discussion as Markdown, every number taken from the run's Dataset."""
    def gap(a, b):
        return spread_text((ds.psnr.sel(variant=a) - ds.psnr.sel(variant=b)).values, "+.2f", prefix="from")

    lpnet = [v for v in ds.variant.values if v != "siren"]
    enc = ds.enc_params.sel(variant=lpnet)
    best = max(ds.variant.values, key=lambda v: float(ds.psnr.sel(variant=v).mean()))
    n = ds.sizes["datum"] * ds.sizes["seed"]
    budgets, curve = ds.step_budget.values, ds.steps_psnr
    rise = {v: float(curve.sel(curve_variant=v)[-1] - curve.sel(curve_variant=v)[0]) for v in ds.curve_variant.values}
    return "\n".join([
        f"- **Sizes.** Every LPNet variant stores {int(ds.stored.sel(variant='lpnet_s3k').max())} numbers (the "
        f"latent grid, {ds.attrs['latent_channels']} channels at 1/{ds.attrs['factor']} of the side, and one "
        f"shared decoder), SIREN {int(ds.stored.sel(variant='siren').max())}; the encoders, not stored, have "
        f"{int(enc.min())} to {int(enc.max())} parameters (`ds.enc_params`).",
        f"- **S3K against a plain conv** (dB, mean over {n} fits, then the range): {gap('lpnet_s3k', 'lpnet_conv')};"
        f" without its decays {gap('lpnet_s3k_nodecay', 'lpnet_conv')}; S3K minus its no-decay control "
        f"{gap('lpnet_s3k', 'lpnet_s3k_nodecay')}.",
        f"- **Training length.** From {budgets[0]} to {budgets[-1]} steps the PSNR rose by "
        + ", ".join(f"{rise[v]:+.2f} dB ({LABELS[v]})" for v in rise)
        + ": a curve still rising at the right end measures how fast a model learns, not what it can hold.",
        f"- **The pyramid**: S3K Laplacian minus flat {gap('lpnet_s3k', 's3k_flat')}, image pyramid minus flat "
        f"{gap('s3k_image_pyramid', 's3k_flat')}; Mamba Laplacian minus flat {gap('lpnet_mamba', 'mamba_flat')}, "
        f"image pyramid minus flat {gap('mamba_image_pyramid', 'mamba_flat')}.",
        f"- **Stacking** two S3K layers minus one: {gap('s3k_stacked', 's3k_flat')}.",
        f"- **Best at this size**: {LABELS[best]} ({float(ds.psnr.sel(variant=best).mean()):.2f} dB). SIREN stores "
        "as many numbers as the LPNet models but spends none of them on a latent grid.",
    ])
