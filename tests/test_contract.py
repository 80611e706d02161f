"""Every registered method honours the contract (CONTRIBUTING.md), checked over the whole registry.

Fields documented and bounded; the folder's file roles; files of a readable size; no method importing another; no
private name imported across packages; notebooks papermill-native and in step with their Config; data variables
with long_name and units; every claim with a control or a stated reason, finite at ``ci``, never passing on a tie.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from lab import notebooks, registry
from lab.claims import MIN_SEED_SHARE, SEED_SHARE_UNIT, VERDICTS
from lab.config import PROFILE_NAMES, BaseConfig, field_specs

ROOT = Path(__file__).resolve().parent.parent
SLUGS = registry.slugs()
ROLES = ("__init__.py", "config.py", "model.py", "experiment.py", "claims.py", "plots.py")
MAX_LINES = 420  # "at most ~400 lines"


def _sources(*folders: str):
    for folder in folders:
        yield from sorted((ROOT / folder).rglob("*.py"))


def _imports(path: Path):
    """(module, names) of every import in a file, relative imports resolved."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, []
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                module = ".".join([*base, module]) if module else ".".join(base)
            yield module, [a.name for a in node.names]


def test_methods_are_registered_in_order():
    assert SLUGS[0] == "dam"
    positions = [registry.position(s) for s in SLUGS]
    assert positions == sorted(positions)


@pytest.mark.parametrize("slug", SLUGS)
def test_method_record(slug):
    m = registry.get(slug)
    assert issubclass(m.config, BaseConfig)
    assert m.notebook == f"{registry.position(slug):02d}_{slug}.ipynb"
    assert m.notebook_path.exists(), f"{slug}: no notebook {m.notebook}"
    for profile in PROFILE_NAMES:
        m.make_config(profile)  # every profile validates
    claims = m.claim_list
    assert len(claims) >= 2
    assert len({c.name for c in claims}) == len(claims)
    for claim in claims:
        assert claim.source and claim.threshold_source and claim.statement


@pytest.mark.parametrize("slug", SLUGS)
def test_folder_has_its_roles_and_readable_files(slug):
    folder = ROOT / "lab" / "methods" / slug
    present = {p.name for p in folder.glob("*.py")}
    missing = [r for r in ROLES if r not in present]
    assert not missing, f"{slug}: missing {missing}"
    if registry.get(slug).dashboards:
        assert "live.py" in present, f"{slug} has a dashboard but no live.py"
    for path in folder.glob("*.py"):
        n = len(path.read_text(encoding="utf-8").splitlines())
        assert n <= MAX_LINES, f"{path.relative_to(ROOT)} has {n} lines (at most ~400)"
    init = (folder / "__init__.py").read_text(encoding="utf-8")
    assert "Method.here(__name__" in init


def test_viz_has_no_method_module():
    names = {p.stem for p in (ROOT / "lab" / "viz").glob("*.py")} - {"__init__", "style"}
    assert not names & set(SLUGS), f"method plots belong in lab/methods/<slug>/plots.py: {names & set(SLUGS)}"


@pytest.mark.parametrize("slug", SLUGS)
def test_every_field_documented_and_bounded(slug):
    specs = field_specs(registry.get(slug).config)
    undocumented = [n for n, s in specs.items() if len(s.doc) < 10]
    unbounded = [n for n, s in specs.items() if not s.bounded and s.element_type is not str]
    free_strings = [n for n, s in specs.items() if s.element_type is str and s.choices is None]
    assert not undocumented, f"{slug}: fields without a docstring: {undocumented}"
    assert not unbounded, f"{slug}: fields without declared bounds: {unbounded}"
    assert not free_strings, f"{slug}: string fields without choices: {free_strings}"


def test_no_method_imports_another_method():
    for path in _sources("lab/methods"):
        own = path.relative_to(ROOT / "lab" / "methods").parts[0]
        for module, _ in _imports(path):
            if module.startswith("lab.methods."):
                other = module.split(".")[2]
                assert other == own, f"{path.relative_to(ROOT)} imports method {other}"


def _private_prefix(dotted: str) -> str | None:
    """The package that owns the first private part of ``dotted`` (``a.b._c.d`` -> ``a.b``), or None."""
    parts = dotted.split(".")
    for i, part in enumerate(parts):
        if part.startswith("_") and not part.startswith("__"):
            return ".".join(parts[:i])
    return None


def test_no_private_name_used_across_packages():
    """``from x._y import z``, ``from x import _y`` and ``module._name`` only inside the package that owns them."""
    offences = []
    for path in _sources("lab", "dashboards", "kernels"):
        me = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        bound: dict[str, str] = {}
        for module, names in _imports(path):
            for dotted in [module, *(f"{module}.{n}" for n in names)]:
                owner = _private_prefix(dotted)
                if owner is not None and not me.startswith(owner + "."):
                    offences.append(f"{me}: imports {dotted}")
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for a in node.names:
                    bound[a.asname or a.name] = f"{node.module}.{a.name}"
            elif isinstance(node, ast.Import):
                for a in node.names:
                    bound[a.asname or a.name.split(".")[0]] = a.asname and a.name or a.name.split(".")[0]
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in bound
                    and node.attr.startswith("_") and not node.attr.startswith("__")):
                owner = bound[node.value.id]
                if owner.split(".")[0] in ("lab", "dashboards", "kernels") and not me.startswith(owner + "."):
                    offences.append(f"{me}: uses {owner}.{node.attr}")
    assert not offences, "private names used across packages:\n" + "\n".join(sorted(set(offences)))


def test_dashboards_import_only_their_method_live_and_plots():
    for name, shown in registry.dashboard_methods().items():
        path = ROOT / "dashboards" / f"{name}.py"
        allowed = {f"lab.methods.{slug}{part}" for slug in shown for part in (".live", ".plots", ".config", "")}
        for module, _ in _imports(path):
            if module.startswith("lab.methods."):
                assert module in allowed, f"dashboards/{name}.py imports {module}"


@pytest.mark.parametrize("slug", SLUGS)
def test_notebook_is_papermill_native(slug):
    nb = json.loads(registry.get(slug).notebook_path.read_text())
    cells = nb["cells"]
    tagged = [c for c in cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(tagged) == 1
    assert "".join(tagged[0]["source"]) == notebooks.parameters_source(slug), \
        f"{slug}: parameters cell out of step with the Config (run `lab sync`)"
    code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    assert "save_to=result_path" in code and f'notebook_overrides("{slug}"' in code
    assert all("id" in c for c in cells), f"{slug}: cells without ids (nbformat 4.5)"
    for c in cells:
        if c["cell_type"] == "code":
            assert not c.get("outputs") and not c.get("execution_count"), f"{slug}: stored outputs"
            src = "".join(c["source"])
            tree = ast.parse(src)
            defs = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef, ast.Lambda))]
            assert not defs, f"{slug}: definitions belong in lab/"


@pytest.mark.parametrize("slug", SLUGS)
def test_claims_have_controls_and_never_pass_on_ties(slug):
    for claim in registry.get(slug).claim_list:
        assert claim.control is not None or claim.no_control or claim.report, \
            f"{slug}.{claim.name}: no control and no stated reason"
        tied = dataclasses.replace(claim, measure=lambda ds, t=claim.threshold: t, control=None, no_control="x")
        assert tied.evaluate(xr.Dataset()).verdict in ("fails", "reported"), f"{slug}.{claim.name} passes on a tie"


@pytest.mark.parametrize("slug", SLUGS)
def test_one_headline_claim_a_verdict(slug):
    heads = [c.name for c in registry.get(slug).claim_list if c.headline]
    assert len(heads) == 1, f"{slug}: headline claims {heads}; exactly one is the paper's central result"
    (head,) = [c for c in registry.get(slug).claim_list if c.headline]
    assert not head.report, f"{slug}.{head.name}: the headline is a verdict, never a report row"


@pytest.mark.parametrize("slug", SLUGS)
def test_every_control_is_competent_or_analytic(slug):
    """A learned control (or learned baseline) carries a competence check; an analytic one says why it needs none."""
    for claim in registry.get(slug).claim_list:
        if claim.report or claim.control is None:
            continue
        assert claim.competence or claim.control_analytic, \
            f"{slug}.{claim.name}: its control states neither a competence check nor why it is analytic"
        assert not (claim.competence and claim.control_analytic), \
            f"{slug}.{claim.name}: a control is learned (competence) or analytic, not both"


@pytest.mark.parametrize("slug", SLUGS)
def test_seed_majority_bars_are_not_passed_by_chance(slug):
    """A claim counted in seeds requires more than 3/4 of them (4 of 5): a coin passes 'most seeds' too often."""
    for claim in registry.get(slug).claim_list:
        words = f"{claim.statement} {claim.threshold_source}".lower()
        counted = claim.unit == SEED_SHARE_UNIT or "majority of seeds" in words or "most seeds" in words
        if not counted or claim.report:
            continue
        assert claim.unit == SEED_SHARE_UNIT, f"{slug}.{claim.name}: a seed count is measured with seed_share"
        assert claim.op in (">", ">=") and claim.threshold >= MIN_SEED_SHARE, \
            f"{slug}.{claim.name}: {claim.op} {claim.threshold} of seeds; at least > {MIN_SEED_SHARE} (4 of 5)"


@pytest.mark.parametrize("slug", SLUGS)
def test_ci_run_is_documented_and_measurable(slug, ci_result):
    res = ci_result(slug)
    ds = res.data
    assert ds.attrs["method"] == slug and ds.attrs["profile"] == "ci"
    undocumented = [str(v) for v in ds.data_vars if not {"long_name", "units"} <= set(ds[v].attrs)]
    assert not undocumented, f"{slug}: data variables without long_name/units: {undocumented}"
    assert len(res.claims) == len(registry.get(slug).claim_list)
    for r in res.claims:
        assert r.verdict in VERDICTS
        assert math.isfinite(r.measured), f"{slug}.{r.name} not finite at ci: {r.detail}"
        if r.control_why == "" and not r.verdict == "reported":
            assert r.control_measured is not None and np.isfinite(r.control_measured), \
                f"{slug}.{r.name}: the ci run does not produce the control value ({r.control_detail})"
        for c in r.competence:
            assert math.isfinite(c.measured), f"{slug}.{r.name}: competence '{c.label}' not finite at ci: {c.detail}"


def test_unknown_method_lists_known():
    with pytest.raises(registry.UnknownMethodError, match="known methods: .*dam"):
        registry.get("nope")
