"""The noise model: each series' spread (a robust standard deviation of its log statistic) from
its own history since the last change point or annotation, else from a calibration of quiet
reruns at one commit (perf-data/noise.json), else a default; and its baseline (history median)."""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass
from pathlib import Path

from . import steps, store

NOISE_FILE = store.DATA / "noise.json"
MAD_SCALE = 1.4826  # MAD x this estimates the standard deviation of a normal distribution
# ... without bias only for large n; Croux & Rousseeuw (1992) small-sample factors (n/(n-0.8)
# from 10 on): a 5-run calibration's MAD alone is 18% low on average.
SMALL_SAMPLE = {2: 1.196, 3: 1.495, 4: 1.363, 5: 1.206, 6: 1.200, 7: 1.140, 8: 1.129, 9: 1.107}
MIN_HISTORY = 8  # points since the last change before history gives the spread
MIN_CALIBRATION_RUNS = 5
MIN_WORK_HISTORY = 2  # points of a count-tier series before its history gives the spread
DEFAULT_SPREAD = 0.10  # no history, no calibration: a guess, said so (source "default")
UNSTABLE = 0.15  # spread above this: shown, never gating
PARAMS = {"estimator": "MAD of log statistic x 1.4826 x small-sample factor (Croux & "
                        "Rousseeuw 1992)", "mad_scale": MAD_SCALE,
          "min_history": MIN_HISTORY, "min_calibration_runs": MIN_CALIBRATION_RUNS,
          "default_spread": DEFAULT_SPREAD, "unstable_above": UNSTABLE}


@dataclass
class Spread:
    """The spread of one series (sd of its log statistic) and where it came from."""

    value: float
    source: str  # "history" | "calibration" | "default"
    n: int

    @property
    def unstable(self) -> bool:
        return self.value > UNSTABLE


def robust_sd(values: list[float]) -> float:
    """MAD-based standard deviation: 1.4826 x the median absolute deviation from the median,
    with the small-sample factor for ``len(values)``."""
    n = len(values)
    m = statistics.median(values)
    factor = SMALL_SAMPLE.get(n, n / (n - 0.8) if n > 1 else 1.0)
    return factor * MAD_SCALE * statistics.median(abs(v - m) for v in values)


def _logs(values: list[float]) -> list[float]:
    return [math.log(v) for v in values if v > 0]


def _annotations(runs: list[store.Run], annotations: list[dict] | None) -> list[dict]:
    if annotations is not None:
        return annotations
    return store.load_annotations(runs[0].path.parent) if runs else []


def current_segment(name: str, runs: list[store.Run],
                    annotations: list[dict] | None = None) -> list[tuple[store.Run, float]]:
    """(run, statistic) of the non-loaded runs since the series' last change point or
    annotation. Annotations default to those stored beside the runs."""
    annotations = _annotations(runs, annotations)
    points = store.series_points(name, runs)
    start = steps.baseline_start(name, points, annotations)
    found = steps.series_steps(name, runs, annotations)
    if found:
        start = max(start, found[-1].index)
    return points[start:]


def series_spread(name: str, runs: list[store.Run], calibration: dict | None = None,
                  annotations: list[dict] | None = None, type_: str | None = None) -> Spread:
    """The spread of series ``name``: from history once it has MIN_HISTORY non-loaded points
    since its last change, else from ``calibration`` (noise.json's content), else the
    default. A count of work (``type_`` "work") repeats exactly on every rerun and machine
    measured (docs/regressions.md, "The count tier"): its spread comes from history from
    MIN_WORK_HISTORY points on, and is 0 before."""
    logs = _logs([v for _, v in current_segment(name, runs, annotations)])
    if len(logs) >= (MIN_WORK_HISTORY if type_ == "work" else MIN_HISTORY):
        return Spread(robust_sd(logs), "history", len(logs))
    entry = (calibration or {}).get("series", {}).get(name)
    if entry is not None:
        return Spread(float(entry["spread"]), "calibration", int(entry["n"]))
    if type_ == "work":
        return Spread(0.0, "default", 0)
    return Spread(DEFAULT_SPREAD, "default", 0)


def has_baseline(name: str, runs: list[store.Run],
                 annotations: list[dict] | None = None) -> bool:
    """Whether series ``name`` has non-loaded points since its last change point or
    annotation (a series measured only before a machine annotation has none: it is new on
    this machine)."""
    return bool(current_segment(name, runs, annotations))


def baseline(name: str, runs: list[store.Run], annotations: list[dict] | None = None) -> float:
    """The median statistic of series ``name`` since its last change point or annotation
    (non-loaded runs)."""
    values = [v for _, v in current_segment(name, runs, annotations)]
    if not values:
        raise ValueError(f"series {name!r} has no non-loaded history since its last change "
                         "point or annotation; record a run first (perf run --record)")
    return statistics.median(values)


def calibrate(runs_at_one_commit: list[store.Run]) -> dict:
    """noise.json's content from 5+ quiet reruns at one commit: per series the robust sd of
    its log statistic over the non-loaded runs."""
    commits = {r.commit for r in runs_at_one_commit}
    if len(commits) > 1:
        raise ValueError(f"calibration runs must share one commit, got {sorted(commits)}")
    quiet = [r for r in runs_at_one_commit if not r.loaded]
    if len(quiet) < MIN_CALIBRATION_RUNS:
        raise ValueError(f"calibration needs >= {MIN_CALIBRATION_RUNS} runs not marked loaded, "
                         f"got {len(quiet)} (of {len(runs_at_one_commit)})")
    series = {}
    for name in store.series_names(quiet):
        logs = _logs([v for _, v in store.series_points(name, quiet)])
        if len(logs) >= MIN_CALIBRATION_RUNS:
            series[name] = {"spread": robust_sd(logs), "n": len(logs)}
    return {"series": series, "params": PARAMS, "commit": commits.pop(),
            "time": store.utc_now()}


def load_calibration(path: Path = NOISE_FILE) -> dict | None:
    """noise.json's content, or None when no calibration was written."""
    path = Path(path)
    return json.loads(path.read_text()) if path.exists() else None


def write_calibration(calibration: dict, path: Path = NOISE_FILE) -> Path:
    Path(path).write_text(json.dumps(calibration, indent=1, sort_keys=True) + "\n")
    return Path(path)
