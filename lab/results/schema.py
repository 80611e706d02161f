"""A method's results declared once: every variable with its dimensions, ``long_name`` and units, filled cell by cell
during the run and built into an :class:`xarray.Dataset` that checks nothing was left unfilled by mistake.

Declare the schema next to the experiment, allocate it with the run's sizes, fill it in the experiment's loop::

    SCHEMA = Schema(
        Var("accuracy", ("seed", "model"), "final test accuracy", "%"),
        Var("curve", ("seed", "model", "point"), "test accuracy during training", "%",
            missing="runs evaluated at fewer points leave the rest NaN"),
        Var("state_size", ("seed", "model", "layer"), "final states per block", "states", dtype=int),
        coords={"model": Coord("the model trained"), "point": Coord("training step", "steps")},
    )

    res = SCHEMA.new(seed=cfg.seeds, model=MODELS, layer=np.arange(L), point=EVAL_POINTS)
    for s, seed in enumerate(cfg.seeds):
        for m, name in enumerate(MODELS):
            out = train(...)
            res["accuracy"][s, m] = out.accuracy
            res["curve"][s, m, : len(out.curve)] = out.curve
            res["state_size"][s, m] = out.sizes
    res.coord("point", steps_of_the_evaluations)
    return res.build(attrs={"dataset": task.name})

A dimension is given its coordinate values (a sequence) or only its size (an int: no coordinate unless
:meth:`Results.coord` sets one later). :meth:`Results.build` raises when a variable declared without ``missing`` has
cells that were never written; a variable that may keep unwritten cells says why in ``missing`` (its long_name should
say it too), and those cells keep the variable's ``fill`` (NaN for floats).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import xarray as xr


@dataclass(frozen=True)
class Coord:
    """A dimension's coordinate attrs: what it indexes and its units (None: no units attr)."""

    long_name: str = ""
    units: str | None = None

    def attrs(self) -> dict[str, str]:
        out = {"long_name": self.long_name} if self.long_name else {}
        if self.units is not None:
            out["units"] = self.units
        return out


@dataclass(frozen=True)
class Var:
    """One result variable, declared once.

    Arguments:
        name: the Dataset variable's name.
        dims: its dimensions, in order (``()`` for a scalar).
        long_name: what it is, in words (may hold ``{placeholders}`` filled from :meth:`Schema.new`'s ``context``).
        units: its units (``"1"`` for dimensionless).
        dtype: ``float`` (default, float64), ``np.float32`` (images, weights stored at their own precision), ``int``
            or ``bool``.
        missing: None when every cell must be written; else why some cells may stay unwritten (they keep ``fill``).
        fill: the value of unwritten cells (NaN for floats; an int or bool variable with ``missing`` must name one).
    """

    name: str
    dims: tuple[str, ...]
    long_name: str
    units: str = "1"
    dtype: type = float
    missing: str | None = None
    fill: Any = None

    def __post_init__(self) -> None:
        if isinstance(self.dims, str):
            raise TypeError(f"Var {self.name!r}: dims must be a tuple of names, got the string {self.dims!r}")
        if self.dtype not in (float, np.float32, int, bool):
            raise TypeError(f"Var {self.name!r}: dtype must be float, np.float32, int or bool, got {self.dtype!r}")
        if self.dtype not in (float, np.float32) and self.missing is not None and self.fill is None:
            raise ValueError(f"Var {self.name!r}: an {self.dtype.__name__} variable with missing cells needs a fill "
                             f"value")

    @property
    def fill_value(self) -> Any:
        if self.fill is not None:
            return self.fill
        return {float: np.nan, np.float32: np.nan, int: 0, bool: False}[self.dtype]


class Cells:
    """A variable being filled: index it to write (``cells[i, j] = x``) or to read back what was written."""

    def __init__(self, var: Var, shape: tuple[int, ...]):
        self.var = var
        self.data = np.full(shape, var.fill_value, dtype=var.dtype)
        self.written = np.zeros(shape, dtype=bool)

    def __setitem__(self, index: Any, value: Any) -> None:
        try:
            self.data[index] = value
        except (ValueError, IndexError) as exc:
            raise type(exc)(f"{self.var.name} {self.var.dims} of shape {self.data.shape}: cannot write "
                            f"{np.shape(value)} at {index!r}: {exc}") from None
        self.written[index] = True

    def __getitem__(self, index: Any) -> Any:
        return self.data[index]

    @property
    def shape(self) -> tuple[int, ...]:
        return self.data.shape


class Schema:
    """The variables of a method's results Dataset, and the attrs of its coordinates.

    Arguments:
        *variables: the :class:`Var` declarations (names unique).
        coords: attrs of the dimensions' coordinates (a :class:`Coord`, or a string: its long_name).
    """

    def __init__(self, *variables: Var, coords: Mapping[str, Coord | str] | None = None):
        names = [v.name for v in variables]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"variables declared twice: {', '.join(twice)}")
        self.variables: dict[str, Var] = {v.name: v for v in variables}
        self.coords: dict[str, Coord] = {
            k: (c if isinstance(c, Coord) else Coord(str(c))) for k, c in (coords or {}).items()
        }

    @property
    def dims(self) -> list[str]:
        """Every dimension the variables use, in order of first use."""
        out: list[str] = []
        for v in self.variables.values():
            out.extend(d for d in v.dims if d not in out)
        return out

    def __add__(self, other: Schema) -> Schema:
        return Schema(*self.variables.values(), *other.variables.values(), coords={**self.coords, **other.coords})

    def new(self, *, context: Mapping[str, Any] | None = None, **dims: Sequence[Any] | int) -> Results:
        """Allocate the results of one run.

        Arguments:
            context: values for ``{placeholders}`` in the variables' long_names.
            **dims: every dimension the variables use: its coordinate values (a sequence) or its size (an int).
        """
        missing = [d for d in self.dims if d not in dims]
        if missing:
            raise ValueError(f"Schema.new: no size for dimension(s) {', '.join(missing)} "
                             f"(given: {', '.join(dims) or 'none'})")
        return Results(self, dims, context or {})


def _values(values: Sequence[Any] | int) -> tuple[int, np.ndarray | None]:
    if isinstance(values, (int, np.integer)):
        return int(values), None
    arr = np.asarray(list(values) if not isinstance(values, np.ndarray) else values)
    return len(arr), arr


class Results:
    """One run's results being filled: ``res[name]`` gives the variable's :class:`Cells`; ``res[name] = array``
    writes it whole; :meth:`build` returns the Dataset."""

    def __init__(self, schema: Schema, dims: Mapping[str, Sequence[Any] | int], context: Mapping[str, Any]):
        self.schema = schema
        self.context = dict(context)
        self.sizes: dict[str, int] = {}
        self.coord_values: dict[str, np.ndarray] = {}
        for name, values in dims.items():
            self.sizes[name], arr = _values(values)
            if arr is not None:
                self.coord_values[name] = arr
        self.cells: dict[str, Cells] = {
            v.name: Cells(v, tuple(self.sizes[d] for d in v.dims)) for v in schema.variables.values()
        }

    def __getitem__(self, name: str) -> Cells:
        try:
            return self.cells[name]
        except KeyError:
            raise KeyError(f"{name!r} is not declared in the schema; declared: {', '.join(self.cells)}") from None

    def __setitem__(self, name: str, value: Any) -> None:
        cells = self[name]
        value = np.asarray(value)
        if value.shape != cells.shape:
            raise ValueError(f"{name} {cells.var.dims}: expected shape {cells.shape}, got {value.shape}")
        cells[...] = value

    def coord(self, dim: str, values: Iterable[Any]) -> None:
        """Set (or replace) the coordinate values of ``dim`` (their number must be its size)."""
        arr = np.asarray(list(values) if not isinstance(values, np.ndarray) else values)
        if dim not in self.sizes:
            raise KeyError(f"{dim!r} is not a dimension of these results; dimensions: {', '.join(self.sizes)}")
        if len(arr) != self.sizes[dim]:
            raise ValueError(f"coordinate {dim}: {len(arr)} values for a dimension of size {self.sizes[dim]}")
        self.coord_values[dim] = arr

    def unwritten(self) -> dict[str, int]:
        """Variables declared without ``missing`` that have unwritten cells, with how many."""
        return {n: int((~c.written).sum()) for n, c in self.cells.items()
                if c.var.missing is None and not c.written.all()}

    def build(self, attrs: Mapping[str, Any] | None = None) -> xr.Dataset:
        """The Dataset: every variable with its attrs, the coordinates with theirs, ``attrs`` on the Dataset.

        Raises:
            ValueError: a variable declared without ``missing`` has cells that were never written.
        """
        left = self.unwritten()
        if left:
            raise ValueError("results left unfilled (declare `missing=` with the reason if that is intended): "
                             + "; ".join(f"{n}: {k} of {self.cells[n].data.size} cells" for n, k in left.items()))
        data_vars = {}
        for name, cells in self.cells.items():
            v = cells.var
            long_name = v.long_name.format_map(self.context) if self.context else v.long_name
            data_vars[name] = (v.dims, cells.data, {"long_name": long_name, "units": v.units})
        coords = {}
        for dim, values in self.coord_values.items():
            meta = self.schema.coords.get(dim)
            coords[dim] = (dim, values, meta.attrs() if meta else {})
        return xr.Dataset(data_vars, coords=coords, attrs=dict(attrs or {}))
