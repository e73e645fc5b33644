"""perf.bench.baseline: calibrated ratios and regression detection on hand-made benchmark JSON."""

import pytest

from perf.bench.baseline import compare, render, summarize


def bench_json(calib_python=1.0, calib_torch=2.0, compile_s=3.0, forward_s=0.5, phases=None):
    def bench(name, seconds, **extra):
        return {"name": name, "stats": {"min": seconds}, "extra_info": extra}
    return {"benchmarks": [
        bench("test_calibration_python", calib_python, calibration="python"),
        bench("test_calibration_torch", calib_torch, calibration="torch"),
        bench("test_compile[m]", compile_s, normalize_by="python",
              phases=phases or {"capture": 1.0, "build": 0.001}),
        bench("test_forward[m]", forward_s, normalize_by="torch"),
    ]}


def test_ratios_use_the_named_calibration():
    s = summarize(bench_json())
    assert s["benchmarks"]["test_compile[m]"]["ratio"] == pytest.approx(3.0)
    assert s["benchmarks"]["test_forward[m]"]["ratio"] == pytest.approx(0.25)
    assert s["benchmarks"]["test_compile[m]::capture"]["ratio"] == pytest.approx(1.0)
    assert "test_calibration_python" not in s["benchmarks"]


def test_a_uniformly_slower_machine_is_not_a_regression():
    base = summarize(bench_json())
    slower = summarize(bench_json(2.0, 4.0, 6.0, 1.0, {"capture": 2.0, "build": 0.002}))
    assert {r.verdict for r in compare(base, slower)} <= {"ok", "noise"}


def test_regression_beyond_threshold_relative_to_calibration():
    base = summarize(bench_json())
    worse = summarize(bench_json(compile_s=5.0))  # ratio 3.0 -> 5.0
    rows = {r.name: r for r in compare(base, worse, threshold=1.5)}
    assert rows["test_compile[m]"].verdict == "REGRESSED"
    assert rows["test_compile[m]"].change == pytest.approx(5 / 3)
    assert rows["test_forward[m]"].verdict == "ok"
    assert rows["test_compile[m]::build"].verdict == "noise"  # 1-2 ms: not judged
    assert {r.verdict for r in compare(base, worse, threshold=2.0)} <= {"ok", "noise"}
    assert "REGRESSED" in render(list(rows.values()), 1.5)


def test_new_and_missing_benchmarks_do_not_fail():
    base = summarize(bench_json())
    new = summarize(bench_json())
    new["benchmarks"]["test_other"] = {"seconds": 1.0, "ratio": 1.0}
    del new["benchmarks"]["test_forward[m]"]
    verdicts = {r.name: r.verdict for r in compare(base, new)}
    assert verdicts["test_other"] == "new" and verdicts["test_forward[m]"] == "missing"


def test_results_without_calibration_are_rejected():
    with pytest.raises(ValueError, match="calibration"):
        summarize({"benchmarks": []})
