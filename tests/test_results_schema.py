"""lab.results.Schema: variables declared once, filled cell by cell, built into a Dataset that refuses gaps."""

from __future__ import annotations

import numpy as np
import pytest

from lab.results import Coord, Schema, Var

SCHEMA = Schema(
    Var("acc", ("seed", "model"), "final accuracy of {what}", "%"),
    Var("curve", ("seed", "point"), "accuracy during training", "%", missing="short runs stop early"),
    Var("size", ("seed", "layer"), "states per layer", "states", dtype=int),
    Var("best", (), "best accuracy", "%"),
    coords={"model": Coord("the model"), "point": Coord("training step", "steps"), "seed": "seed"},
)


def test_filled_cell_by_cell_builds_the_dataset_with_attrs():
    res = SCHEMA.new(seed=[0, 1], model=["a", "b"], point=3, layer=np.arange(2), context={"what": "each model"})
    for s in range(2):
        for m in range(2):
            res["acc"][s, m] = 10 * s + m
        res["curve"][s, : 2 + s] = [1.0, 2.0, 3.0][: 2 + s]
        res["size"][s] = [4, 5]
    res["best"] = 11.0
    res.coord("point", [10, 20, 30])
    ds = res.build(attrs={"dataset": "toy"})
    assert ds["acc"].attrs == {"long_name": "final accuracy of each model", "units": "%"}
    assert ds["acc"].values.tolist() == [[0, 1], [10, 11]]
    assert np.isnan(ds["curve"].values[0, 2]) and ds["curve"].values[1, 2] == 3.0
    assert ds["size"].dtype.kind == "i" and ds["size"].values.tolist() == [[4, 5], [4, 5]]
    assert ds["point"].values.tolist() == [10, 20, 30] and ds["point"].attrs == {"long_name": "training step",
                                                                                 "units": "steps"}
    assert ds["model"].values.tolist() == ["a", "b"] and float(ds["best"]) == 11.0
    assert ds.attrs == {"dataset": "toy"}


def test_a_cell_left_unfilled_by_mistake_is_an_error_that_names_it():
    res = SCHEMA.new(seed=[0, 1], model=["a", "b"], point=3, layer=2)
    res["acc"][0] = [1, 2]  # seed 1 never written
    res["size"] = np.ones((2, 2), int)
    res["best"] = 1.0
    with pytest.raises(ValueError, match=r"acc: 2 of 4 cells"):
        res.build()
    res["acc"][1, :] = np.nan  # NaN written on purpose is a value, not a gap
    assert np.isnan(res.build()["acc"].values[1]).all()


def test_bad_declarations_and_shapes_name_the_variable():
    with pytest.raises(ValueError, match="declared twice: x"):
        Schema(Var("x", (), "x"), Var("x", ("a",), "x"))
    with pytest.raises(ValueError, match="needs a fill"):
        Var("n", ("a",), "count", dtype=int, missing="some")
    with pytest.raises(ValueError, match="no size for dimension.*layer"):
        SCHEMA.new(seed=2, model=2, point=3)
    res = SCHEMA.new(seed=2, model=2, point=3, layer=2)
    with pytest.raises(ValueError, match=r"acc \('seed', 'model'\): expected shape \(2, 2\)"):
        res["acc"] = np.zeros(3)
    with pytest.raises(KeyError, match="'nope' is not declared"):
        res["nope"]
    with pytest.raises(ValueError, match="coordinate point: 2 values for a dimension of size 3"):
        res.coord("point", [1, 2])
