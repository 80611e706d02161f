"""`lab bench layers --quick`: every layer measured side by side with mambapy, ratios in the attrs."""

import numpy as np

from lab.bench.layers import LAYERS, format_layers_bench, run_layers_bench


def test_layers_bench_measures_every_layer_against_mambapy():
    ds = run_layers_bench(quick=True, progress=False)
    assert list(ds.layer.values) == list(LAYERS)
    assert np.isfinite(ds.tokens_per_s.values).all() and (ds.tokens_per_s.values > 0).all()
    assert ds.attrs["lab_mamba_train_x_mambapy"] > 0
    table = format_layers_bench(ds)
    assert "x mambapy" in table and "lab_mamba2" in table
