"""Steps in run history: the change points of each series over its non-loaded runs, named by
commit range with before/after medians, and the annotations that close them. An upward step
of a CPU-time, memory or latency series between two commits that no annotation closed is an
open regression, unless the code it measured is the same on both sides (one commit, or
commits whose library and models git finds identical): then the machine moved."""

from __future__ import annotations

import functools
import math
import statistics
import subprocess
from dataclasses import dataclass

from . import changepoints, store
from .worker import ROOT

GATED_TYPES = ("cpu", "rss", "latency")  # wall time is shown, never gated
# what a perf run measures: the library, the zoo's models and the declared dependencies
# (a change to perf/ or the docs alone leaves it the same)
MEASURED_CODE = ("torch_trt_ref", "zoo/models", "zoo/entry.py", "zoo/registry.py",
                 "pyproject.toml")


@functools.lru_cache(maxsize=None)
def same_code(before: str, after: str) -> bool:
    """Whether commits ``before`` and ``after`` hold the same MEASURED_CODE (``git diff
    --quiet``); False when git cannot tell (a commit missing from this clone)."""
    if before == after:
        return True
    try:
        done = subprocess.run(["git", "diff", "--quiet", before, after, "--", *MEASURED_CODE],
                              cwd=ROOT, capture_output=True)
    except OSError:
        return False
    return done.returncode == 0


@dataclass
class Step:
    """A change point of one series' history, in the units of the series."""

    series: str
    unit: str
    type: str
    index: int  # position in the series' points (its non-loaded runs, oldest first)
    commit_before: str  # the last run before the step
    commit_after: str  # the first run after it: the commit to annotate
    time_after: str
    median_before: float
    median_after: float
    pvalue: float
    annotation: dict | None  # the annotation that closed it, if any

    @property
    def ratio(self) -> float:
        return self.median_after / self.median_before if self.median_before else math.inf

    @property
    def same_commit(self) -> bool:
        """Both sides of the step ran the same commit: the machine moved, not the code."""
        return self.commit_before == self.commit_after

    @property
    def same_code(self) -> bool:
        """The code measured on both sides is the same: the machine moved (or the way it was
        measured did), not the library."""
        return same_code(self.commit_before, self.commit_after)

    @property
    def open_regression(self) -> bool:
        return (self.annotation is None and self.type in GATED_TYPES and self.ratio > 1
                and not self.same_code)

    def describe(self) -> str:
        state = (f"{self.annotation['action']}: {self.annotation['reason']}"
                 if self.annotation else "open")
        return (f"{self.series}: {self.median_before:.4g} -> {self.median_after:.4g} {self.unit} "
                f"(x{self.ratio:.3f}, p={self.pvalue:.1e}) after {self.commit_before[:10]}, "
                f"first at {self.commit_after[:10]} [{state}]")


def judged_values(type_: str, values: list[float]) -> list[float]:
    """The scale change points are found on: logs for noisy series, raw for exact ones."""
    if type_ in store.NOISY_TYPES and all(v > 0 for v in values):
        return [math.log(v) for v in values]
    return list(values)


def annotation_position(name: str, points: list, annotation: dict) -> int:
    """Where ``annotation`` starts a new baseline of series ``name`` in ``points``: the first
    point at its commit, else (commit not recorded) after every point older than it."""
    for i, (run, _) in enumerate(points):
        if store.commit_matches(run.commit, annotation["commit"]):
            return i
    t = store.parse_time(annotation["time"])
    return sum(1 for run, _ in points if store.parse_time(run.time) <= t)


def baseline_start(name: str, points: list, annotations: list[dict]) -> int:
    """Where the newest annotation of series ``name`` starts its baseline (0: none)."""
    return max((annotation_position(name, points, a)
                for a in store.annotations_for(name, annotations)), default=0)


def series_steps(name: str, runs: list, annotations: list[dict]) -> list[Step]:
    """The change points of series ``name`` over its non-loaded runs, each with its commit range,
    the medians of the segments on either side, and the first annotation at or after it."""
    points = store.series_points(name, runs)
    if len(points) < 4:
        return []
    values = [v for _, v in points]
    kind = points[0][0].series[name]
    found = changepoints.change_points(judged_values(kind.type, values),
                                       changepoints.params_for(kind.type))
    closers = sorted(((annotation_position(name, points, a), a)
                      for a in store.annotations_for(name, annotations)), key=lambda t: t[0])
    bounds = [0, *(c.index for c in found), len(points)]
    steps = []
    for k, c in enumerate(found):
        i = int(c.index)
        closed = next((a for pos, a in closers if pos >= i), None)
        steps.append(Step(name, kind.unit, kind.type, i, points[i - 1][0].commit,
                          points[i][0].commit, points[i][0].time,
                          statistics.median(values[bounds[k]:i]),
                          statistics.median(values[i:bounds[k + 2]]), c.pvalue, closed))
    return steps


def all_steps(runs: list, annotations: list[dict]) -> list[Step]:
    return [s for name in store.series_names(runs) for s in series_steps(name, runs, annotations)]


def open_regressions(runs: list, annotations: list[dict]) -> list[Step]:
    """Every upward step of a CPU-time, memory or latency series that no annotation closed."""
    return [s for s in all_steps(runs, annotations) if s.open_regression]
