"""Regression detection of ``zoo compare`` on hand-made records."""

import copy
import json

import pytest

from zoo import cli
from zoo import compare as cmp
from zoo.compare import Thresholds, compare, regressions, render
from zoo.schema import SCHEMA_VERSION

MiB = 2**20


def record(key="m/fast/fp32", status="ok", engines=2, torch_segments=1, transitions=2,
           supported=40, total=45, outside=2.0, build=1.0, latency=0.1, rss=200 * MiB,
           plan=50 * MiB):
    model, strategy, precision = key.split("/")
    r = {"schema_version": SCHEMA_VERSION, "status": status, "error": None,
         "cell": {"key": key, "model": model, "strategy": strategy, "precision": precision,
                  "resource_partitioning": False}}
    if status != "ok":
        r["error"] = {"stage": "compile", "type": "RuntimeError", "message": "boom"}
        return r
    r.update(partition={"engines": engines, "torch_segments": torch_segments,
                        "transitions": transitions},
             ops={"supported": supported, "total": total}, outside_builder_seconds=outside,
             phases={"build": build}, latency={"median_s": latency},
             memory={"peak_rss_bytes": rss}, engines={"plan_bytes": plan},
             accuracy={"passed": True, "compiled_rmse": 1e-7, "eager_rmse": 1e-7})
    return r


def verdicts(deltas):
    return {(d.key, d.metric): d.verdict for d in deltas}


def test_identical_sweeps_have_no_regression():
    base = [record(), record("n/dependency_aware/fp16")]
    deltas = compare(base, copy.deepcopy(base))
    assert not regressions(deltas)
    assert {d.verdict for d in deltas} == {cmp.SAME}


@pytest.mark.parametrize("field,value,verdict", [
    ("engines", 3, cmp.CHANGED), ("engines", 1, cmp.CHANGED),
    ("torch_segments", 2, cmp.REGRESSED), ("torch_segments", 0, cmp.IMPROVED),
    ("transitions", 3, cmp.REGRESSED),
    ("supported", 39, cmp.REGRESSED), ("supported", 41, cmp.IMPROVED),
    ("total", 46, cmp.CHANGED),
])
def test_counts_are_exact(field, value, verdict):
    name = {"supported": "supported_ops", "total": "total_ops"}.get(field, field)
    deltas = compare([record()], [record(**{field: value})])
    assert verdicts(deltas)[("m/fast/fp32", name)] == verdict
    assert bool(regressions(deltas)) == (verdict != cmp.IMPROVED)


def test_strict_fails_on_improvements_too():
    deltas = compare([record()], [record(torch_segments=0)], strict=True)
    assert verdicts(deltas)[("m/fast/fp32", "torch_segments")] == cmp.CHANGED
    assert regressions(deltas)


@pytest.mark.parametrize("field,factor,verdict", [
    ("outside", 1.4, cmp.SAME), ("outside", 1.6, cmp.REGRESSED), ("outside", 0.5, cmp.IMPROVED),
    ("rss", 1.2, cmp.SAME), ("rss", 1.5, cmp.REGRESSED), ("build", 2.0, cmp.REGRESSED),
])
def test_time_and_memory_are_ratios(field, factor, verdict):
    base = record()
    new = record(**{field: {"outside": 2.0, "rss": 200 * MiB, "build": 1.0}[field] * factor})
    name = {"outside": "outside_builder_s", "rss": "peak_rss_bytes", "build": "build_s"}[field]
    assert verdicts(compare([base], [new]))[("m/fast/fp32", name)] == verdict


def test_thresholds_are_configurable_and_tiny_values_are_noise():
    base, new = record(outside=2.0), record(outside=3.0)
    assert regressions(compare([base], [new], Thresholds(time=1.4)))
    assert not regressions(compare([base], [new], Thresholds(time=1.6)))
    tiny = compare([record(outside=0.01)], [record(outside=0.1)])
    assert verdicts(tiny)[("m/fast/fp32", "outside_builder_s")] == cmp.SAME


def test_counts_only_ignores_time_and_memory():
    deltas = compare([record()], [record(outside=20.0, rss=4000 * MiB)], counts_only=True)
    assert not regressions(deltas)
    assert {d.metric for d in deltas} == {"status", "engines", "torch_segments", "transitions",
                                          "supported_ops", "total_ops", "accuracy_passed"}


def test_losing_accuracy_is_a_regression():
    base, new = record(), record()
    new["accuracy"] = {"passed": False, "compiled_rmse": 1e-3, "eager_rmse": 1e-7}
    verdict = verdicts(compare([base], [new], counts_only=True))
    assert verdict[("m/fast/fp32", "accuracy_passed")] == cmp.REGRESSED
    assert verdicts(compare([new], [base]))[("m/fast/fp32", "accuracy_passed")] == cmp.IMPROVED


def test_a_version_1_baseline_is_judged_by_its_within_tolerance():
    base = record()
    base.update(schema_version=1, accuracy={"within_tolerance": True, "max_abs_error": 1e-5})
    new = record()
    new["accuracy"] = {"passed": False}
    assert verdicts(compare([base], [new]))[("m/fast/fp32", "accuracy_passed")] == \
        cmp.REGRESSED


def test_status_missing_and_new_cells():
    base = [record("a/fast/fp32"), record("b/fast/fp32"), record("c/fast/fp32", "error")]
    new = [record("a/fast/fp32", "error"), record("c/fast/fp32"), record("d/fast/fp32")]
    v = verdicts(compare(base, new))
    assert v[("a/fast/fp32", "status")] == cmp.REGRESSED
    assert v[("b/fast/fp32", "cell")] == cmp.MISSING
    assert v[("c/fast/fp32", "status")] == cmp.IMPROVED
    assert v[("d/fast/fp32", "cell")] == cmp.NEW


def test_render_lists_changed_rows_and_a_summary():
    text = render(compare([record()], [record(torch_segments=3)]))
    assert "torch_segments" in text and "+2" in text and cmp.REGRESSED in text
    assert "engines" not in text  # unchanged rows are hidden by default
    assert "engines" in render(compare([record()], [record(torch_segments=3)]), show_all=True)


def test_cli_exit_code(tmp_path, capsys):
    base, same, worse = (tmp_path / f"{n}.jsonl" for n in ("base", "same", "worse"))
    base.write_text(json.dumps(record()) + "\n")
    same.write_text(json.dumps(record(outside=2.1)) + "\n")
    worse.write_text(json.dumps(record(engines=5)) + "\n")
    assert cli.main(["compare", str(base), str(same)]) == 0
    assert cli.main(["compare", str(base), str(worse)]) == 1
    assert cli.main(["compare", str(base), str(worse), "--counts-only"]) == 1
    out = capsys.readouterr().out
    assert "engines" in out and "+3" in out
