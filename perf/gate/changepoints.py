"""Change points of a series: E-divisive means with a Student's t-test, the algorithm of Hunter /
Apache Otava (Fleming et al., "Hunter: Using Change Point Detection to Hunt for Performance
Regressions", ICPE 2023), written here from their description and code.

Note [E-divisive with a t-test]
    Split: in overlapping windows (``window_len`` points, stepping half a window) run
    E-divisive (Matteson & James 2014, alpha = 1): in every segment between the change points
    found so far, take the split tau (and end kappa) maximizing the energy statistic Q-hat;
    keep the best split over all segments while a two-sided t-test between its two sides
    gives p <= 10 x max_pvalue. Merge: over the whole series, recompute each candidate's
    t-test against the segments up to its neighbours and drop the weakest (largest p; once
    all pass, the smallest step if under ``min_magnitude``) until every change point passes.

    ``HUNTER`` is Otava's algorithm as its code does it, quirks included, so that Otava's
    published results replay exactly (tests/test_perf_changepoints.py replays its TigerBeetle
    series at ten settings): the split's t-test runs to the end of the segment, the t-test
    gets the population sd (ddof 0), and after a removal the merge recomputes the point after
    it and the next one, leaving the point before it stale (``otava_merge``).

    ``DEFAULT`` (what perf uses, on log statistics) keeps the algorithm and changes what the
    measurements below said to change. On 40 points of pure noise (log sd 3-5%) Otava's
    settings report a change in ~3% of series at p 0.001: its p ignores that the split was
    the best of ~40. So here: the t-test gets the sample sd (ddof 1, which scipy's
    ``ttest_ind_from_stats`` expects); its p is multiplied by the number of splits the segment
    offered (Bonferroni); a split tested in the split phase ends at kappa (Otava's test to
    the segment end misses a step up then back down, e.g. a regression fixed 9 runs later;
    ruptures finds it); both neighbours of a removed point are recomputed; a change needs
    >= 2 points on either side (a lone outlier is not two changes); and a step must reach
    the verdict rule's minimum effect (10% time, 5% memory: a smaller one the gate would
    never act on). Measured on 5000 seeded replays (log sd 3-5%): 0.04% of series without a
    step show a change, a 15% step at point 25 of 40 is found within 2 points in 99.7%;
    Bonferroni costs about one more run before a fresh step shows at 5% noise.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace

import numpy as np
from scipy.stats import ttest_ind_from_stats

# The smallest step worth a change point, as a ratio: the minimum effects of the verdict rule
# (issue 23: 10% for time, 5% for memory). Exact series (counts) change at any difference.
MIN_EFFECT = {"cpu": 1.10, "wall": 1.10, "latency": 1.10, "rss": 1.05, "work": 1.01}


@dataclass(frozen=True)
class Params:
    max_pvalue: float = 0.001
    window_len: int = 50
    min_magnitude: float = math.log(MIN_EFFECT["cpu"])
    magnitude: str = "difference"  # "difference" of means (log data) | "relative" (Otava's)
    ddof: int = 1
    min_after: int = 2
    min_before: int = 2
    otava_merge: bool = False
    kappa_test: bool = True
    bonferroni: bool = True

    def to_json(self) -> dict:
        return {"algorithm": "E-divisive means (alpha=1) + two-sided t-test, Hunter/Otava",
                "split_pvalue": 10 * self.max_pvalue, **asdict(self)}


DEFAULT = Params()


def params_for(type_: str) -> Params:
    """The parameters for a series of ``type_`` (store.SERIES_TYPES): logs with the type's
    minimum effect for noisy series, any change for exact ones."""
    if type_ in MIN_EFFECT:
        return replace(DEFAULT, min_magnitude=math.log(MIN_EFFECT[type_]))
    return replace(DEFAULT, min_magnitude=0.0)


HUNTER = Params(min_magnitude=0.0, magnitude="relative", ddof=0, min_after=1, min_before=1,
                otava_merge=True, kappa_test=False, bonferroni=False)


@dataclass
class ChangePoint:
    """A change at ``index``: values[index] is the first point after it."""

    index: int
    pvalue: float
    mean_before: float
    mean_after: float

    def magnitude(self, kind: str) -> float:
        if kind == "difference":
            return abs(self.mean_after - self.mean_before)
        if self.mean_before == 0 or self.mean_after == 0:
            return 0.0
        return max(abs(self.mean_after / self.mean_before - 1),
                   abs(self.mean_before / self.mean_after - 1))


def qhat_candidate(x: np.ndarray, start: int, stop: int) -> tuple[int, float, int]:
    """The split of x[start:stop] with the largest Q-hat over every tau < kappa <= stop:
    (tau, Q, kappa). O(n^2) pairs, each O(1) from 2-d prefix sums of |x_i - x_j|."""
    z = x[start:stop]
    n = len(z)
    p = np.zeros((n + 1, n + 1))
    p[1:, 1:] = np.abs(z[:, None] - z[None, :]).cumsum(0).cumsum(1)

    def block(a, b, c, d):  # sum of |z_i - z_j| for a <= i < b, c <= j < d
        return p[b, d] - p[a, d] - p[b, c] + p[a, c]

    tau = np.arange(1, n)[:, None]
    kappa = np.arange(2, n + 1)[None, :]
    nx, ny = tau.astype(float), (kappa - tau).astype(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        q = (2 / (nx + ny) * block(0, tau, tau, kappa)
             - np.where(nx > 1, ny / (nx + ny) / (nx - 1), 0) * block(0, tau, 0, tau)
             - np.where(ny > 1, nx / (nx + ny) / (ny - 1), 0) * block(tau, kappa, tau, kappa))
    q = np.where(kappa > tau, q, -np.inf)
    i, j = np.unravel_index(np.argmax(q), q.shape)
    return int(start + i + 1), float(q[i, j]), int(start + j + 2)


def ttest(left: np.ndarray, right: np.ndarray, ddof: int) -> float:
    """Two-sided Student's t-test p-value of two segments from their means and deviations."""
    if len(left) + len(right) <= 2:
        return 1.0
    sl = float(np.std(left, ddof=ddof)) if len(left) >= 2 else 0.0
    sr = float(np.std(right, ddof=ddof)) if len(right) >= 2 else 0.0
    ml, mr = float(np.mean(left)), float(np.mean(right))
    if sl == 0.0 and sr == 0.0:
        return 1.0 if ml == mr else 0.0
    return float(ttest_ind_from_stats(ml, sl, len(left), mr, sr, len(right))[1])


def _point(x: np.ndarray, index: int, bounds: list[int], params: Params) -> ChangePoint:
    start = max(b for b in bounds if b < index)
    stop = min(b for b in bounds if b > index)
    left, right = x[start:index], x[index:stop]
    short = len(left) < params.min_before or len(right) < params.min_after
    p = 1.0 if short else ttest(left, right, params.ddof)
    if params.bonferroni:
        p = min(1.0, p * (stop - start - 1))
    return ChangePoint(index, p, float(np.mean(left)), float(np.mean(right)))


def e_divisive(x: np.ndarray, pvalue: float, params: Params) -> list[int]:
    """E-divisive on one window, stopping at the first best split that is not significant."""
    found: list[int] = []
    while True:
        bounds = [0, *found, len(x)]
        candidates = [qhat_candidate(x, a, b) for a, b in zip(bounds, bounds[1:]) if b - a > 1]
        if not candidates:
            return found
        tau, _, kappa = max(candidates, key=lambda c: c[1])
        if _point(x, tau, [*bounds, kappa] if params.kappa_test else bounds,
                  params).pvalue > pvalue:
            return found
        found = sorted([*found, tau])


def split(x: np.ndarray, pvalue: float, params: Params) -> list[int]:
    """Weak change points: E-divisive over overlapping windows, their union."""
    start, step, found = 0, max(params.window_len // 2, 1), set()
    while start < len(x):
        stop = min(start + params.window_len, len(x))
        new = [start + i for i in e_divisive(x[start:stop], pvalue, params)]
        found.update(new)
        start = max(max(new, default=0), start + step)
    return sorted(found)


def merge(x: np.ndarray, indexes: list[int], params: Params) -> list[ChangePoint]:
    """Drop the weakest weak change point until all pass p and magnitude; after a removal
    recompute the neighbours whose segments changed (see Note: ``otava_merge``)."""
    bounds = [0, *indexes, len(x)]
    points = [_point(x, i, bounds, params) for i in indexes]
    while points:
        weakest = max(points, key=lambda c: c.pvalue)
        if weakest.pvalue <= params.max_pvalue:
            weakest = min(points, key=lambda c: c.magnitude(params.magnitude))
            if weakest.magnitude(params.magnitude) > params.min_magnitude:
                return points
        k = points.index(weakest)
        del points[k]
        bounds = [0, *(c.index for c in points), len(x)]
        for j in (k, k + 1) if params.otava_merge else (k - 1, k):
            if 0 <= j < len(points):
                points[j] = _point(x, points[j].index, bounds, params)
    return []


def change_points(values, params: Params = DEFAULT) -> list[ChangePoint]:
    """Change points of ``values``, given on the scale they are judged on (perf passes log
    statistics of noisy series)."""
    x = np.asarray(values, dtype=float)
    if x.ndim != 1 or not np.all(np.isfinite(x)):
        raise ValueError("change_points needs a 1-d series of finite numbers")
    p = params.max_pvalue  # the split's looser threshold, as Otava picks it
    pvalue = p * 10 if p < 0.05 else (p * 2 if p < 0.5 else p)
    return merge(x, split(x, pvalue, params), params)
