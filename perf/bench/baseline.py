"""Perf results as ratios to the calibration workload of the same run, and their comparison
with a stored baseline. The best (minimum) time of each benchmark is used: interference from
other processes only ever adds time, so the minimum is the stable estimator."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

SCHEMA_VERSION = 1
CALIBRATION_PREFIX = "test_calibration_"
DEFAULT_THRESHOLD = 1.5
MIN_SECONDS = 0.005  # shorter than this in the baseline and now: noise, not judged


def summarize(pytest_benchmark_json: dict[str, Any]) -> dict[str, Any]:
    """Reduce pytest-benchmark's JSON to {calibration, benchmarks: {name: ratio...}}. A
    benchmark picks its calibration with ``extra_info["normalize_by"]``: "python" (the
    default: this compiler is interpreter-bound) or "torch" (the matmul loop)."""
    calibration: dict[str, float] = {}
    raw = pytest_benchmark_json["benchmarks"]
    for b in raw:
        if b["name"].startswith(CALIBRATION_PREFIX):
            calibration[b["extra_info"]["calibration"]] = b["stats"]["min"]
    if not calibration:
        raise ValueError("no calibration benchmark in the results "
                         "(perf/bench/test_calibration.py)")
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
    env = {k: v for k, v in pytest_benchmark_json.get("machine_info", {}).items()
           if k in ("node", "processor", "machine", "python_version", "cpu")}
    return {"schema_version": SCHEMA_VERSION, "calibration": calibration,
            "benchmarks": benchmarks, "machine": env,
            "datetime": pytest_benchmark_json.get("datetime")}


@dataclass(frozen=True)
class Row:
    name: str
    base_ratio: float | None
    new_ratio: float | None
    verdict: str  # "ok", "REGRESSED", "improved", "new", "missing", "noise"

    @property
    def change(self) -> float | None:
        if self.base_ratio and self.new_ratio is not None:
            return self.new_ratio / self.base_ratio
        return None


def compare(base: dict[str, Any], new: dict[str, Any],
            threshold: float = DEFAULT_THRESHOLD) -> list[Row]:
    """One row per benchmark: REGRESSED when its calibrated ratio grew by more than
    ``threshold`` x; benchmarks shorter than MIN_SECONDS on both sides are noise."""
    if base.get("schema_version") != SCHEMA_VERSION:
        raise ValueError(f"baseline schema_version {base.get('schema_version')!r}, "
                         f"expected {SCHEMA_VERSION}")
    rows = []
    b, n = base["benchmarks"], new["benchmarks"]
    for name in sorted(set(b) | set(n)):
        if name not in n:
            rows.append(Row(name, b[name]["ratio"], None, "missing"))
        elif name not in b:
            rows.append(Row(name, None, n[name]["ratio"], "new"))
        else:
            old, cur = b[name], n[name]
            change = cur["ratio"] / old["ratio"] if old["ratio"] else float("inf")
            if max(old["seconds"], cur["seconds"]) < MIN_SECONDS:
                verdict = "noise"
            elif change > threshold:
                verdict = "REGRESSED"
            elif change < 1 / threshold:
                verdict = "improved"
            else:
                verdict = "ok"
            rows.append(Row(name, old["ratio"], cur["ratio"], verdict))
    return rows


def render(rows: list[Row], threshold: float) -> str:
    lines = [f"{'benchmark':58s} {'base':>10s} {'new':>10s} {'new/base':>9s}  verdict",
             "-" * 100]
    for r in rows:
        fmt = lambda x: "-" if x is None else f"{x:10.4g}"
        change = "-" if r.change is None else f"{r.change:9.2f}"
        lines.append(f"{r.name[:58]:58s} {fmt(r.base_ratio)} {fmt(r.new_ratio)} {change:>9s}  "
                     f"{r.verdict}")
    bad = sum(r.verdict == "REGRESSED" for r in rows)
    lines.append(f"ratios are benchmark time / calibration time of the same run; "
                 f"{bad} regression(s) beyond x{threshold}")
    return "\n".join(lines)
