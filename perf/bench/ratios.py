"""A benchmark run's results as ratios to the calibration workload measured in the same run
(``test_calibration.py``), and the table ``python -m perf.bench.run`` prints. The best
(minimum) time of each benchmark is used: interference from other processes only ever adds
time, so the minimum is the stable estimator. Ratios are compared within one run (a phase
against the whole compile, one strategy against another), never with a stored baseline:
the regression gate (perf/gate/, docs/regressions.md) is the one check across commits."""

from __future__ import annotations

from typing import Any

CALIBRATION_PREFIX = "test_calibration_"


def summarize(pytest_benchmark_json: dict[str, Any]) -> dict[str, Any]:
    """Reduce pytest-benchmark's JSON to {calibration, benchmarks: {name: ratio...}}. A
    benchmark picks its calibration with ``extra_info["normalize_by"]``: "python" (the
    default: this compiler is interpreter-bound) or "torch" (the matmul loop); each phase in
    ``extra_info["phases"]`` becomes a row ``name::phase``."""
    calibration: dict[str, float] = {}
    raw = pytest_benchmark_json["benchmarks"]
    for b in raw:
        if b["name"].startswith(CALIBRATION_PREFIX):
            calibration[b["extra_info"]["calibration"]] = b["stats"]["min"]
    if not calibration:
        raise ValueError("no calibration benchmark in the results "
                         "(perf/bench/test_calibration.py): run it with the suites")
    benchmarks: dict[str, dict[str, Any]] = {}
    for b in raw:
        if b["name"].startswith(CALIBRATION_PREFIX):
            continue
        by = b["extra_info"].get("normalize_by", "python")
        calib = calibration.get(by) or next(iter(calibration.values()))
        seconds = b["stats"]["min"]
        benchmarks[b["name"]] = {"seconds": seconds, "normalize_by": by,
                                 "ratio": seconds / calib}
        for phase, s in (b["extra_info"].get("phases") or {}).items():
            benchmarks[f"{b['name']}::{phase}"] = {"seconds": s, "normalize_by": by,
                                                   "ratio": s / calib}
    return {"calibration": calibration, "benchmarks": benchmarks}


def render(summary: dict[str, Any]) -> str:
    """One line per benchmark: its best seconds and its ratio to its calibration."""
    lines = [f"{'benchmark':64s} {'best s':>10s} {'ratio':>10s}  calibration", "-" * 100]
    for name, b in sorted(summary["benchmarks"].items()):
        lines.append(f"{name[:64]:64s} {b['seconds']:10.4g} {b['ratio']:10.4g}  "
                     f"{b['normalize_by']}")
    calibration = ", ".join(f"{k} {v:.4g} s" for k, v in sorted(summary["calibration"].items()))
    lines.append(f"ratio: best time / the calibration workload's best time in this run "
                 f"({calibration})")
    return "\n".join(lines)
