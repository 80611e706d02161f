"""`lab bench layers --quick`: every layer measured side by side with mambapy, at one thread and at torch's default
threads, the Mamba blocks also against their own matrix products; ratios in the attrs."""

import numpy as np
import torch

from lab.bench.layers import GEMMS, LAYERS, format_layers_bench, gemm_calls, run_layers_bench
from lab.core.ssm import Mamba


def test_layers_bench_measures_every_layer_against_mambapy_and_the_blocks_against_their_gemms():
    ds = run_layers_bench(quick=True, progress=False)
    assert list(ds.layer.values) == list(LAYERS) + list(GEMMS)
    assert ds.threads.values[0] == 1 and ds.attrs["default_threads"] == torch.get_num_threads()
    assert len(ds.threads) == (1 if torch.get_num_threads() == 1 else 2)
    assert np.isfinite(ds.tokens_per_s.values).all() and (ds.tokens_per_s.values > 0).all()
    one = ds.tokens_per_s.sel(threads=1)
    for mode in ("forward", "train"):
        assert ds.attrs[f"lab_mamba_{mode}_x_mambapy"] == float(one.sel(layer="lab_mamba", mode=mode)
                                                                / one.sel(layer="mambapy", mode=mode))
        assert ds.attrs[f"lab_mamba_{mode}_x_gemms"] == float(one.sel(layer="lab_mamba_gemms", mode=mode)
                                                              / one.sel(layer="lab_mamba", mode=mode))
    if len(ds.threads) == 2:
        assert "lab_mamba2_train_x_gemms_default_threads" in ds.attrs
    table = format_layers_bench(ds)
    assert "x mambapy" in table and "x GEMMs" in table and "lab_mamba2_gemms" in table
    assert table.count("torch threads") == len(ds.threads)


def test_a_blocks_gemms_are_its_linear_layers_on_its_tokens():
    """The GEMM rows run every nn.Linear of the block (forward; training also fills each weight's gradient)."""
    block = Mamba(16, 4)
    forward, train = gemm_calls(block, tokens=10)
    forward()
    assert all(p.grad is None for p in block.parameters())
    train()
    linears = [m for m in block.modules() if isinstance(m, torch.nn.Linear)]
    assert len(linears) == 4 and all(m.weight.grad is not None for m in linears)
    assert block.A_log.grad is None  # the scan's parameters are not part of the floor
