"""Every registered method honours the contract: notebook, profiles, claims, a ci run in seconds."""

import json
import time

import pytest

import lab
from lab import registry
from lab.config import PROFILE_NAMES, BaseConfig

SLUGS = registry.slugs()


def test_methods_are_registered():
    assert "dam" in SLUGS


@pytest.mark.parametrize("slug", SLUGS)
def test_method_record(slug):
    m = registry.get(slug)
    assert issubclass(m.config, BaseConfig)
    for profile in PROFILE_NAMES:
        m.make_config(profile)  # every profile validates
    assert len(m.claim_list) >= 2
    assert len({c.name for c in m.claim_list}) == len(m.claim_list)
    for claim in m.claim_list:
        assert claim.source and claim.threshold_source and claim.statement


@pytest.mark.parametrize("slug", SLUGS)
def test_notebook_has_parameters_and_no_outputs(slug):
    nb = json.loads(registry.get(slug).notebook_path.read_text())
    cells = nb["cells"]
    tagged = [c for c in cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(tagged) == 1
    source = "".join(tagged[0]["source"])
    for name in ("profile", "result_path", "overrides"):
        assert f"{name} =" in source
    for c in cells:
        if c["cell_type"] == "code":
            assert not c.get("outputs") and not c.get("execution_count"), f"{slug}: stored outputs"
            code = "".join(c["source"])
            assert "def " not in code and "class " not in code, f"{slug}: definitions belong in lab/"


@pytest.mark.parametrize("slug", SLUGS)
def test_ci_run_finishes_in_seconds(slug):
    start = time.perf_counter()
    res = lab.run(slug, "ci", progress=False)
    assert time.perf_counter() - start < 120
    assert res.data.attrs["method"] == slug and res.data.attrs["profile"] == "ci"
    assert len(res.claims) == len(registry.get(slug).claim_list)


def test_unknown_method_lists_known():
    with pytest.raises(registry.UnknownMethodError, match="known methods: .*dam"):
        registry.get("nope")
