"""``lab new SLUG``: a new method's folder, notebook and test, written from the templates below.

The folder it writes is small but whole: every file role of a method (``__init__``, ``config``, ``model``,
``experiment`` on :class:`lab.results.Schema`, ``claims`` with the measure builders and a headline, ``plots``), the
notebook ``notebooks/NN_<slug>.ipynb`` (``NN`` the next number, which is the method's place in the registry), a test
``tests/methods/test_<slug>.py``, and the README's method table. Its experiment is a placeholder that runs from the
first minute (the mean of Gaussian samples estimated by their average, against a one-sample control), so the
contract tests, ``lab run SLUG --profile ci`` and the report work before the paper's method replaces it.

Everything is checked before anything is written, and each file is written atomically; a failure part-way removes
what this call wrote.
"""

from __future__ import annotations

import json
import keyword
import re
import shutil
from pathlib import Path

from lab.checks import bad_value
from lab.io import atomic_write_text

__all__ = ["new_method"]

ROOT = Path(__file__).resolve().parent.parent
SLUG_RE = re.compile(r"^[a-z][a-z0-9_]{1,30}$")

_INIT = '''r"""{title}.

Paper: {paper}.

**Idea.** Write the paper's idea, its equations and its central claim here: this docstring is the method's page.

**In this lab.** Written by ``lab new``: the experiment below is a placeholder (the mean of Gaussian samples estimated
by their average, against a one-sample control) that runs from the first minute. Replace :mod:`.model`,
:mod:`.experiment`, :mod:`.claims` and :mod:`.plots` with the paper's method; notebook ``{notebook}``.
"""

from lab.registry import Method

METHOD = Method.here(__name__, title={title!r}, paper={paper!r}, summary={summary!r})

__all__ = ["METHOD"]
'''

_CONFIG = '''"""Configuration of {slug} (defaults = the quick profile)."""

from __future__ import annotations

import dataclasses
from typing import Annotated, ClassVar

from lab.budget import Budget
from lab.config import BaseConfig, Each, Range


@dataclasses.dataclass(frozen=True)
class Config(BaseConfig):
    """{title}: the placeholder experiment's fields (replace them with the method's)."""

    PROFILES: ClassVar = {{
        "ci": dict(samples=(1, 16, 64), n_seeds=8),
        "quick": {{}},
        "full": dict(samples=(1, 4, 16, 64, 256, 1024), n_seeds=20),
    }}

    samples: Annotated[tuple[int, ...], Range(1, 1_000_000), Each(min_len=2, increasing=True)] = (1, 4, 16, 64)
    """Sample sizes n the estimator averages: the claims read the largest, the control the first."""
    noise: Annotated[float, Range(0.0, 100.0, lo_open=True)] = 1.0
    """Standard deviation of each sample around the true mean."""
    n_seeds: Annotated[int, Range(1, 100)] = 10
    """Independent repetitions (seeds seed, seed + 1, ...)."""

    @property
    def seeds(self) -> tuple[int, ...]:
        return tuple(self.seed + k for k in range(self.n_seeds))

    def run_budget(self) -> Budget:
        """Memory: the largest sample size's draws (float64). Work: drawing and averaging every sample size on
        every seed (about 20 operations a sample). Replace it with the method's own estimate."""
        return Budget(8.0 * 4 * max(self.samples), 20.0 * sum(self.samples) * self.n_seeds,
                      "{slug}'s samples: n_seeds x samples draws", ("samples", "n_seeds"))
'''

_MODEL = '''"""{slug}'s model: the placeholder estimator (replace it with the paper's model, readable on its own)."""

from __future__ import annotations

import numpy as np


def average(samples: np.ndarray) -> float:
    """The estimate of the mean: the average of ``samples`` (shape ``(n,)``)."""
    return float(np.mean(samples))
'''

_EXPERIMENT = '''"""{slug}'s experiment: ``run`` builds the results Dataset; every variable is declared once in
:data:`SCHEMA`."""

from __future__ import annotations

import numpy as np
import xarray as xr
from tqdm.auto import tqdm

from lab.methods.{slug} import model as M
from lab.methods.{slug}.config import Config
from lab.results import Coord, Schema, Var

__all__ = ["run"]

#: the mean the samples are drawn around
TRUE_MEAN = 0.5

SCHEMA = Schema(
    Var("estimate", ("seed", "n"), "the average of n samples", "1"),
    Var("error", ("seed", "n"), "|estimate - true mean| in units of the samples' standard deviation", "1"),
    coords={{"seed": Coord("seed"), "n": Coord("samples averaged", "samples")}},
)


def run(cfg: Config, progress: bool = True) -> xr.Dataset:
    """Estimate the mean from each sample size, on every seed.

    Returns:
        Dataset with dims seed, n (see each variable's long_name).
    """
    res = SCHEMA.new(seed=list(cfg.seeds), n=list(cfg.samples))
    for s, seed in enumerate(tqdm(cfg.seeds, desc="{slug} seeds", disable=not progress)):
        rng = np.random.default_rng(seed)
        for k, n in enumerate(cfg.samples):
            estimate = M.average(rng.normal(TRUE_MEAN, cfg.noise, size=n))
            res["estimate"][s, k] = estimate
            res["error"][s, k] = abs(estimate - TRUE_MEAN) / cfg.noise
    return res.build(attrs={{"true_mean": TRUE_MEAN, "noise": cfg.noise}})
'''

_CLAIMS = '''"""{slug}'s claims, read from the run's Dataset alone (placeholders: replace them with the paper's).

The headline ``average_is_accurate``: the average of the most samples lands within half a standard deviation of the
true mean on every seed; its control, one sample, does not. Nothing is learned, so the control is analytic.
"""

from __future__ import annotations

from lab.claims import Claim, Pick, value

MOST = Pick("error", "error of the average of the most samples", isel={{"n": -1}})
ONE = Pick("error", "error of one sample", isel={{"n": 0}})
FIRST_HALF = Pick("error", "error, smaller half of the sample sizes", isel={{"n": slice(0, 2)}})

CLAIMS = [
    Claim(
        name="average_is_accurate",
        statement="Averaging the most samples puts the estimate within 0.5 standard deviations of the true mean on "
                  "every seed.",
        source="placeholder written by lab new: replace with the paper's central claim (figure, table, section)",
        measure=value(MOST, statistic="max"),
        op="<",
        threshold=0.5,
        threshold_source="half the samples' standard deviation (our convention)",
        unit="sd",
        control=value(ONE, statistic="max"),
        control_label="one sample in place of the average",
        control_analytic="nothing is learned: the control is the same estimator on one sample",
        headline=True,
    ),
    Claim(
        name="small_samples_error",
        statement="The error of the smaller sample sizes, for comparison.",
        source="placeholder written by lab new",
        measure=value(FIRST_HALF),
        op="<",
        threshold=1.0,
        threshold_source="a report row: shown, no verdict",
        unit="sd",
        no_control="a report row",
        report=True,
    ),
]
'''

_PLOTS = '''"""{slug}'s HoloViews builders, used by its notebook (and a dashboard, if it gets one)."""

from __future__ import annotations

import holoviews as hv
import numpy as np
import xarray as xr

from lab.viz.style import PALETTE


def error_curve(ds: xr.Dataset) -> hv.Overlay:
    """The estimate's error against the sample size n (mean over seeds, every seed as a point), with 1/sqrt(n)."""
    n = ds.n.values.astype(float)
    mean = hv.Curve((n, ds.error.mean("seed").values), "samples n", "error (sd)", label="average").opts(
        color=PALETTE[0], line_width=2)
    points = hv.Scatter((np.repeat(n[None], ds.sizes["seed"], 0).ravel(), ds.error.values.ravel()), "samples n",
                        "error (sd)").opts(color=PALETTE[0], alpha=0.5, size=5)
    ref = hv.Curve((n, np.sqrt(2 / np.pi) / np.sqrt(n)), "samples n", "error (sd)",
                   label="expected: sqrt(2/pi) / sqrt(n)").opts(color=PALETTE[1], line_dash="dashed")
    return (mean * points * ref).opts(logx=True, logy=True, width=600, height=350, legend_position="top_right",
                                      title="Error of the average against the sample size")


def discussion(ds: xr.Dataset, claims) -> str:
    """The notebook's discussion as Markdown, every number taken from the run's Dataset."""
    worst = float(ds.error.isel(n=-1).max())
    return (f"The average of {{int(ds.n.values[-1])}} samples is off by at most {{worst:.3f}} standard deviations "
            f"over {{ds.sizes['seed']}} seeds; {{claims.summary()}}.")
'''

_TEST = '''"""{slug}: the placeholder experiment written by ``lab new`` (replace with the method's own tests)."""

from __future__ import annotations

import numpy as np

import lab
from lab.methods.{slug} import model as M


def test_average_is_the_mean():
    assert M.average(np.array([1.0, 2.0, 6.0])) == 3.0


def test_ci_run_fills_every_cell_and_evaluates_its_claims():
    data, claims = lab.run("{slug}", "ci", progress=False)
    assert set(data.data_vars) == {{"estimate", "error"}}
    assert np.isfinite(data.error.values).all()
    assert claims.headline is not None and np.isfinite(claims.headline.measured)
'''


def _notebook(slug: str, title: str, paper: str) -> dict:
    from lab.notebooks import parameters_source

    def md(text: str) -> dict:
        return {"cell_type": "markdown", "metadata": {}, "source": text.splitlines(keepends=True)}

    def code(text: str, tags: list[str] | None = None) -> dict:
        meta = {"tags": tags} if tags else {}
        return {"cell_type": "code", "execution_count": None, "metadata": meta, "outputs": [],
                "source": text.splitlines(keepends=True)}

    cells: list[dict] = [
        md(f"# {title}\n\n**Paper.** {paper}.\n\n**Idea.** Write the paper's idea and equations here (the notebook "
           f"was written by `lab new`; its experiment is a placeholder)."),
        code(parameters_source(slug), ["parameters"]),
        code(f"from IPython.display import Markdown\n\nimport lab\nfrom lab.methods.{slug} import plots\n\n"
             f"lab.notebooks.setup()  # plots that work offline: BokehJS, Panel's scripts and stylesheets inline"),
        code(f"result = lab.run(\"{slug}\", profile, save_to=result_path, "
             f"**lab.notebook_overrides(\"{slug}\", globals()))\nds = result.data\n"
             f"print(f\"{{ds.attrs['wall_time_s']:.1f}} s, config {{ds.attrs['config']}}\")"),
        md("## The error against the sample size"),
        code("plots.error_curve(ds)"),
        code("lab.viz.headline(plots.error_curve(ds))"),
        md("## Claims"),
        code("result.claims"),
        md("## Discussion"),
        code("Markdown(plots.discussion(ds, result.claims))"),
    ]
    for i, cell in enumerate(cells):
        cell["id"] = f"{slug[:50]}-{i}"
    return {"cells": cells, "metadata": {"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python",
                                                         "name": "python3"},
                                         "language_info": {"name": "python"}},
            "nbformat": 4, "nbformat_minor": 5}


def _check(slug: str, title: str, paper: str, summary: str, root: Path) -> None:
    if not SLUG_RE.match(slug) or keyword.iskeyword(slug):
        raise bad_value("slug", slug, "a lower-case Python name of 2-31 characters: letters, digits, _")
    for name, text in (("title", title), ("paper", paper), ("summary", summary)):
        if not text.strip() or "\n" in text:
            raise bad_value(name, text, "one line of text")
    taken = [p for p in (root / "lab" / "methods" / slug, *root.glob(f"notebooks/[0-9][0-9]_{slug}.ipynb"),
                         root / "tests" / "methods" / f"test_{slug}.py") if p.exists()]
    if taken:
        raise bad_value("slug", slug, f"a new method's name ({', '.join(str(p.relative_to(root)) for p in taken)} "
                                f"already exist)")


def new_method(slug: str, *, title: str, paper: str, summary: str = "", root: Path | None = None) -> list[Path]:
    """Write method ``slug``'s folder, notebook and test, and add it to the README's method table.

    Returns:
        The paths written.

    Raises:
        ConfigError: a bad slug, title, paper or summary, or a slug already taken; nothing is written.
    """
    from lab import notebooks, registry

    root = Path(root) if root is not None else ROOT
    summary = summary or f"{title} (placeholder experiment written by lab new)."
    _check(slug, title, paper, summary, root)
    number = registry.next_number()
    notebook = f"{number:02d}_{slug}.ipynb"
    folder = root / "lab" / "methods" / slug
    values = {"slug": slug, "title": title, "paper": paper, "summary": summary, "notebook": notebook}
    files = {
        folder / "__init__.py": _INIT, folder / "config.py": _CONFIG, folder / "model.py": _MODEL,
        folder / "experiment.py": _EXPERIMENT, folder / "claims.py": _CLAIMS, folder / "plots.py": _PLOTS,
        root / "tests" / "methods" / f"test_{slug}.py": _TEST,
    }
    written: list[Path] = []
    try:
        folder.mkdir(parents=True)
        for path, template in files.items():
            atomic_write_text(path, template.format(**values))
            written.append(path)
        registry.refresh()
        nb_path = root / "notebooks" / notebook
        atomic_write_text(nb_path, json.dumps(_notebook(slug, title, paper), indent=1, ensure_ascii=False) + "\n")
        written.append(nb_path)
        registry.refresh()
        notebooks.sync_parameters(slug, nb_path)
        readme = root / "README.md"
        if readme.exists():
            registry.sync_readme(readme)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        for path in written:
            path.unlink(missing_ok=True)
        registry.refresh()
        raise
    return written
