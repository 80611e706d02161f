"""FNO building blocks (lab.core.fno): shapes, resolution invariance, the FNO's depth, parameter counts, bad input."""

import math

import pytest
import torch

from lab.core.fno import FNO, FourierLayer, SpectralConv, count_parameters, pointwise


@pytest.mark.parametrize(("dim", "shape"), [(1, (3, 4, 32)), (2, (2, 4, 16, 16)), (2, (2, 4, 16, 8))])
def test_spectral_conv_and_fno_shapes(dim, shape):
    x = torch.randn(shape)
    assert SpectralConv(4, 6, modes=4, dim=dim)(x).shape == (shape[0], 6) + shape[2:]
    assert FourierLayer(4, 4, dim)(x).shape == shape
    assert FNO(4, 2, width=8, modes=4, depth=2, dim=dim)(x).shape == (shape[0], 2) + shape[2:]


@pytest.mark.parametrize("dim", [1, 2])
def test_spectral_conv_is_resolution_invariant_on_band_limited_fields(dim):
    """A spectral convolution is a Fourier multiplier on low modes: on a band-limited field, the same weights give
    the same function on a coarse and a fine grid (up to rounding)."""
    torch.manual_seed(0)
    conv = SpectralConv(2, 3, modes=4, dim=dim).double()
    n_fine, n_coarse = 32, 16

    def field(n):
        x = torch.arange(n, dtype=torch.float64) * 2 * math.pi / n
        if dim == 1:
            return torch.stack([torch.sin(x) + 0.5 * torch.cos(3 * x), torch.cos(2 * x)])[None]
        X, Y = torch.meshgrid(x, x, indexing="xy")
        return torch.stack([torch.sin(X + 2 * Y), torch.cos(3 * X) * torch.sin(Y)])[None]

    fine, coarse = conv(field(n_fine)), conv(field(n_coarse))
    sub = fine[..., ::2] if dim == 1 else fine[..., ::2, ::2]
    torch.testing.assert_close(sub, coarse, atol=1e-12, rtol=1e-10)


def test_spectral_conv_drops_the_modes_above_its_cutoff():
    """Only the lowest ``modes`` Fourier modes pass: a field made of higher modes maps to zero."""
    torch.manual_seed(0)
    conv = SpectralConv(1, 1, modes=3).double()
    x = torch.arange(32, dtype=torch.float64) * 2 * math.pi / 32
    high = (torch.sin(5 * x) + torch.cos(9 * x))[None, None]
    low = torch.sin(2 * x)[None, None]
    assert float(conv(high).abs().max()) < 1e-12
    assert float(conv(low).abs().max()) > 1e-3


def test_pointwise_is_the_same_linear_map_at_every_point():
    torch.manual_seed(0)
    layer = pointwise(3, 2, 1)
    x = torch.randn(1, 3, 8)
    out = layer(x)
    W, b = layer.weight[:, :, 0], layer.bias
    torch.testing.assert_close(out[0, :, 5], W @ x[0, :, 5] + b)


def test_fno_parameter_count_grows_by_one_fourier_layer_per_depth():
    width, modes = 8, 4
    counts = [count_parameters(FNO(1, 1, width=width, modes=modes, depth=d)) for d in (1, 2, 3)]
    per_layer = count_parameters(FourierLayer(width, modes))
    assert counts[1] - counts[0] == per_layer and counts[2] - counts[1] == per_layer
    # spectral weights are complex, stored as (real, imag): 2 reals per entry
    assert count_parameters(SpectralConv(width, width, modes)) == 2 * width * width * modes


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="dim=3"):
        SpectralConv(2, 2, modes=4, dim=3)
    with pytest.raises(ValueError, match="modes=0"):
        SpectralConv(2, 2, modes=0)
    with pytest.raises(ValueError, match="depth=0"):
        FNO(1, 1, width=4, modes=2, depth=0)
    with pytest.raises(ValueError, match="dim=0"):
        pointwise(1, 1, 0)
