"""The gate's A/B confirmation against a base tree whose library is older than this
checkout's measurement code, with real measuring servers: CI's gate once died when the base
commit's library could not import a newer conformance case module (the families server
exited), so a suspect on a converter family could never be confirmed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from perf.gate.confirm import BaseCannotMeasure, confirm_group
from perf.gate.worker import ROOT, MeasureError, Pool

MODULE = "attention_op"  # quantization/attention_op.py, which conformance/cases/quantize imports


@pytest.fixture(scope="module")
def older_library(tmp_path_factory) -> Path:
    """A tree whose library is this one with quantization/attention_op.py under another
    name (its own imports follow it): the library works, but conformance/cases/quantize.py
    cannot import it, as with any commit from before that module existed."""
    tree = tmp_path_factory.mktemp("older") / "tree"
    library = tree / "torch_trt_ref"
    shutil.copytree(ROOT / "torch_trt_ref", library,
                    ignore=shutil.ignore_patterns("__pycache__"))
    (library / "quantization" / f"{MODULE}.py").rename(
        library / "quantization" / f"{MODULE}_v0.py")
    for path in library.rglob("*.py"):
        text = path.read_text()
        if f"{MODULE} import" in text:
            path.write_text(text.replace(f"{MODULE} import", f"{MODULE}_v0 import"))
    return tree


@pytest.fixture(scope="module")
def pools(older_library):
    with Pool() as ours, Pool(older_library) as base:
        yield ours, base


def test_a_base_that_cannot_import_a_case_module_still_confirms_its_families(pools):
    ours, base = pools
    skipped = base.skipped_cases()
    assert list(skipped) == ["quantize"] and MODULE in skipped["quantize"]
    assert ours.skipped_cases() == {}
    # every other family is built from the same cases on both sides
    assert base.families() == [f for f in ours.families() if f != "quantize"]
    assert base.family_cases("composites") == ours.family_cases("composites")
    found = confirm_group("family:composites", ["family/composites/cpu"], ours, base, each=2)
    assert [(len(c.a), len(c.b)) for c in found] == [(2, 2)]


def test_a_family_the_base_built_none_of_is_left_unconfirmed(pools):
    ours, base = pools
    assert ours.family_cases("quantize")
    with pytest.raises(BaseCannotMeasure, match=r"built none of the 12 cases of "
                                                 r"family:quantize .*attention_op"):
        confirm_group("family:quantize", ["family/quantize/cpu"], ours, base, each=2)


def test_both_sides_convert_only_the_cases_asked_for(pools):
    ours, _ = pools
    cases = ours.family_cases("composites")
    one = ours.measure("family:composites", cases=cases[:1])
    every = ours.measure("family:composites")
    assert one["family/composites/count/layers"]["value"] < \
        every["family/composites/count/layers"]["value"]
    with pytest.raises(MeasureError, match=r"cases not built by this tree: nothing\[0\]"):
        ours.measure("family:composites", cases=["nothing[0]"])


def test_a_server_that_dies_shows_the_end_of_its_stderr(tmp_path):
    library = tmp_path / "tree" / "torch_trt_ref"
    library.mkdir(parents=True)
    (library / "__init__.py").write_text("raise RuntimeError('this library cannot load')\n")
    with Pool(tmp_path / "tree") as broken:
        for ask in (broken.families, broken.skipped_cases):  # each call says why, again
            with pytest.raises(MeasureError, match=r"exited \(code 1\); the end of its "
                               r"stderr:(.|\n)*RuntimeError: this library cannot load"):
                ask()


def test_a_slowdown_no_converter_of_the_family_would_feel_is_refused(pools):
    """composites' cases lower to other families' ops (matmul to mm and reshapes...): a
    test-only slowdown of its converters would change nothing, so it is an error."""
    ours, _ = pools
    with pytest.raises(MeasureError, match="cannot slow family composites down: none of its "
                                           "converters ran"):
        ours.measure("family:composites", {"family": "composites", "slower": 0.2})


OLD_BASE = "69d9405"  # a commit from before the harness moved (issue 37)


@pytest.fixture(scope="module")
def old_base(tmp_path_factory) -> Path:
    """The library of OLD_BASE, exported from git (the gate's base side measures such a
    tree with this checkout's measurement code: Note [What the measurement code may
    import])."""
    import subprocess

    tree = tmp_path_factory.mktemp("old_base")
    have = subprocess.run(["git", "cat-file", "-e", f"{OLD_BASE}^{{commit}}"], cwd=ROOT)
    assert have.returncode == 0, (f"commit {OLD_BASE} is not in this clone: the gate's A/B "
                                  "needs the history (clone without --depth)")
    archive = subprocess.run(["git", "archive", OLD_BASE, "torch_trt_ref"], cwd=ROOT,
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    return tree


def test_a_base_from_before_the_harness_moved_measures_compiles_and_families(old_base):
    with Pool(old_base) as base:
        compiled = base.measure("compile:lgamma_graph")
        assert compiled["compile/lgamma_graph/cpu/total"]["value"] > 0
        # its one case module that needs a newer library module is left out, with why
        # (before Note [One library per server] it imported this checkout's)
        skipped = base.skipped_cases()
        assert list(skipped) == ["kv_cache"] and "torch_trt_ref.kv_cache_op" in \
            skipped["kv_cache"], skipped
        family = base.measure("family:composites")
        assert family["family/composites/cpu"]["value"] > 0
        # it predates the LLM path: that group cannot be measured, and says why (not with
        # this checkout's torch_trt_ref.llm on that runtime: Note [One library per server])
        with pytest.raises(MeasureError, match="No module named 'torch_trt_ref.llm' in the "
                                               "library measured here"):
            base.measure("llm:gpt2")
