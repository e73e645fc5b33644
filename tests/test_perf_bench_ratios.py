"""perf.bench.ratios: each benchmark as a ratio to the calibration workload of its own run,
on hand-made pytest-benchmark JSON."""

import pytest

from perf.bench.ratios import render, summarize


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


def test_a_uniformly_slower_run_has_the_same_ratios():
    base = summarize(bench_json())["benchmarks"]
    slower = summarize(bench_json(2.0, 4.0, 6.0, 1.0, {"capture": 2.0, "build": 0.002}))
    for name, b in slower["benchmarks"].items():
        assert b["ratio"] == pytest.approx(base[name]["ratio"]), name
        assert b["seconds"] == pytest.approx(2 * base[name]["seconds"]), name


def test_the_table_names_every_benchmark_and_its_calibration():
    text = render(summarize(bench_json()))
    rows = {line.split()[0]: line.split()[1:] for line in text.splitlines()[2:-1]}
    assert set(rows) == {"test_compile[m]", "test_compile[m]::capture",
                         "test_compile[m]::build", "test_forward[m]"}
    assert rows["test_forward[m]"] == ["0.5", "0.25", "torch"]
    assert "python 1 s, torch 2 s" in text.splitlines()[-1]


def test_results_without_calibration_are_rejected():
    with pytest.raises(ValueError, match="calibration"):
        summarize({"benchmarks": []})
