"""Change points over run history: E-divisive means with a Student's t-test, the algorithm of
Hunter / Apache Otava (Fleming et al., ICPE 2023), run on log statistics; and the steps it
finds, named by commit range, with the annotations that close them.

Note [E-divisive with a t-test]
    Hunter replaces E-divisive's permutation test with a t-test and works in two phases.
    Split: in overlapping windows (``window_len`` points, step half a window), repeatedly
    pick the split of a segment that maximizes the energy statistic Q-hat (Matteson & James
    2014, alpha = 1) and keep it while a two-sided t-test between its neighbouring segments
    gives p <= 10 x max_pvalue. Merge: over the whole series, recompute every candidate's
    t-test against its neighbours and drop the weakest (largest p) until all have
    p <= max_pvalue. Hunter's t-test uses the population standard deviation (ddof 0) and
    pooled variances; so does this one, so a series gives the same p-values there and here.
    We add one rule: a change needs ``min_after`` points after it (a single late outlier is
    not a step).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.stats import ttest_ind_from_stats

from . import history

MAX_PVALUE = 0.001
WINDOW_LEN = 50
MIN_AFTER = 2
MIN_SIZE = 2  # points on either side of a candidate split inside E-divisive


@dataclass
class ChangePoint:
    """A change at ``index``: values[index:] differ from the segment before it."""

    index: int
    pvalue: float
    mean_before: float
    mean_after: float


def qhat(values: np.ndarray, min_size: int = MIN_SIZE) -> np.ndarray:
    """Q-hat of every split ``tau`` of ``values`` (left = values[:tau]); -inf where either side
    has fewer than ``min_size`` points. O(n^2) through 2-d prefix sums of |x_i - x_j|."""
    n = len(values)
    q = np.full(n + 1, -np.inf)
    if n < 2 * min_size:
        return q
    d = np.abs(values[:, None] - values[None, :])
    p = np.zeros((n + 1, n + 1))
    p[1:, 1:] = d.cumsum(0).cumsum(1)
    tau = np.arange(min_size, n - min_size + 1)
    m, k = tau.astype(float), (n - tau).astype(float)
    within_left = p[tau, tau] / 2
    within_right = (p[n, n] - p[tau, n] - p[n, tau] + p[tau, tau]) / 2
    between = p[tau, n] - p[tau, tau]
    energy = (2 * between / (m * k) - within_left / (m * (m - 1) / 2)
              - within_right / (k * (k - 1) / 2))
    q[tau] = m * k / n * energy
    return q


def ttest(left: np.ndarray, right: np.ndarray) -> float:
    """Two-sided t-test p-value between two segments, as Hunter computes it."""
    if len(left) == 0 or len(right) == 0 or len(left) + len(right) <= 2:
        return 1.0
    sl = float(np.std(left)) if len(left) >= 2 else 0.0
    sr = float(np.std(right)) if len(right) >= 2 else 0.0
    if sl == 0.0 and sr == 0.0:
        return 0.0 if float(np.mean(left)) != float(np.mean(right)) else 1.0
    _, p = ttest_ind_from_stats(float(np.mean(left)), sl, len(left),
                                float(np.mean(right)), sr, len(right))
    return float(p)


def _stats(values: np.ndarray, index: int, bounds: list[int]) -> ChangePoint:
    start = max(b for b in bounds if b < index)
    end = min(b for b in bounds if b > index)
    left, right = values[start:index], values[index:end]
    return ChangePoint(index, ttest(left, right), float(np.mean(left)), float(np.mean(right)))


def e_divisive(values: np.ndarray, max_pvalue: float) -> list[int]:
    """E-divisive on one window: split the segment with the largest Q-hat while the t-test of
    the new split against its neighbouring change points is significant."""
    found: list[int] = []
    while True:
        bounds = [0, *sorted(found), len(values)]
        best, best_q = None, -np.inf
        for a, b in zip(bounds, bounds[1:]):
            q = qhat(values[a:b])
            tau = int(np.argmax(q))
            if np.isfinite(q[tau]) and q[tau] > best_q:
                best, best_q = a + tau, q[tau]
        if best is None or _stats(values, best, sorted([*bounds, best])).pvalue > max_pvalue:
            return sorted(found)
        found.append(best)


def split(values: np.ndarray, window_len: int, max_pvalue: float) -> list[int]:
    """Candidates from E-divisive over overlapping windows (Hunter's ``split``)."""
    start, step, found = 0, max(window_len // 2, 1), set()
    while start < len(values):
        end = min(start + window_len, len(values))
        new = [start + i for i in e_divisive(values[start:end], max_pvalue)]
        found.update(new)
        start = max(max(new, default=0), start + step)
    return sorted(found)


def merge(values: np.ndarray, indexes: list[int], max_pvalue: float) -> list[ChangePoint]:
    """Drop the weakest candidate until every change point has p <= max_pvalue against the
    segments on either side of it (Hunter's ``merge``, without its magnitude rule)."""
    indexes = list(indexes)
    while indexes:
        bounds = [0, *indexes, len(values)]
        points = [_stats(values, i, bounds) for i in indexes]
        weakest = max(points, key=lambda c: c.pvalue)
        if weakest.pvalue <= max_pvalue:
            return points
        indexes.remove(weakest.index)
    return []


def change_points(values, max_pvalue: float = MAX_PVALUE, window_len: int = WINDOW_LEN,
                  min_after: int = MIN_AFTER) -> list[ChangePoint]:
    """Change points of ``values`` (already on the scale they are judged on: log statistics
    for noisy series). A change point ``i`` means values[i] is the first point after it."""
    x = np.asarray(values, dtype=float)
    if x.ndim != 1 or not np.all(np.isfinite(x)):
        raise ValueError("change_points needs a 1-d series of finite values")
    candidates = [i for i in split(x, window_len, 10 * max_pvalue) if len(x) - i >= min_after]
    return merge(x, candidates, max_pvalue)


PARAMS = {"algorithm": "E-divisive means (alpha=1) + two-sided t-test (Hunter/Otava)",
          "scale": "log of each run's statistic", "max_pvalue": MAX_PVALUE,
          "split_pvalue": 10 * MAX_PVALUE, "window_len": WINDOW_LEN, "min_after": MIN_AFTER}


GATED_TYPES = ("cpu", "rss", "latency")  # an upward step here is an open regression


@dataclass
class Step:
    """A change point of one series' history, in the units of the series."""

    series: str
    unit: str
    type: str
    index: int  # position in the series' points (non-loaded runs holding it)
    commit_before: str
    commit_after: str
    time_after: str
    median_before: float
    median_after: float
    pvalue: float
    annotation: dict | None  # the annotation that closed it, if any

    @property
    def ratio(self) -> float:
        return self.median_after / self.median_before if self.median_before else float("inf")

    @property
    def open_regression(self) -> bool:
        return self.annotation is None and self.type in GATED_TYPES and self.ratio > 1


def judged_values(type_: str, values: list[float]) -> list[float]:
    """The scale change points are found on: logs for noisy series, raw for exact ones."""
    if type_ in history.NOISY_TYPES and all(v > 0 for v in values):
        return [math.log(v) for v in values]
    return list(values)


def annotation_position(name: str, points: list, annotations: list[dict]) -> tuple[int, dict]:
    """Where the newest annotation of series ``name`` starts a new baseline: the first point at
    its commit, else (commit not recorded) after every point older than the annotation.
    (0, None) when the series has no annotation."""
    best = (0, None)
    for a in history.annotations_for(name, annotations):
        pos = next((i for i, (r, _) in enumerate(points)
                    if history.commit_matches(r.commit, a["commit"])), None)
        if pos is None:
            t = history.parse_time(a["time"])
            pos = sum(1 for r, _ in points if history.parse_time(r.time) <= t)
        if pos >= best[0]:
            best = (pos, a)
    return best


def series_steps(name: str, runs: list, annotations: list[dict]) -> list[Step]:
    """The change points of series ``name`` over the non-loaded runs, with their commit
    ranges, before/after medians and the annotation (if any) at or after them."""
    points = history.series_points(name, runs)
    if len(points) < 2 * MIN_SIZE:
        return []
    values = [v for _, v in points]
    first = points[0][0].series[name]
    found = change_points(judged_values(first.type, values))
    closers = [(annotation_position(name, points, [a])[0], a)
               for a in history.annotations_for(name, annotations)]
    bounds = [0, *(c.index for c in found), len(points)]
    steps = []
    for k, c in enumerate(found):
        before, after = values[bounds[k]:c.index], values[c.index:bounds[k + 2]]
        closed = next((a for pos, a in closers if pos >= c.index), None)
        steps.append(Step(name, first.unit, first.type, c.index, points[c.index - 1][0].commit,
                          points[c.index][0].commit, points[c.index][0].time,
                          float(np.median(before)), float(np.median(after)), c.pvalue, closed))
    return steps


def open_regressions(runs: list, annotations: list[dict]) -> list[Step]:
    """Every upward step of a CPU-time, memory or latency series that no annotation closed."""
    return [s for name in history.series_names(runs)
            for s in series_steps(name, runs, annotations) if s.open_regression]
