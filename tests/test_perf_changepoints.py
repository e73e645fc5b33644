"""perf.gate.changepoints against oracles we did not write: Apache Otava's published test series
(Hunter's successor), the ruptures library on synthetic steps, and the detection / false-alarm
rates issue 23 asks for on seeded replays."""

import functools
import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import ruptures

from perf.gate import replays, store
from perf.gate.changepoints import (
    DEFAULT,
    HUNTER,
    ChangePoint,
    change_points,
    e_divisive,
    qhat_candidate,
    ttest,
)

DATA = Path(__file__).parent / "data"

# Hunter's and Otava's tests/analysis_test.py (test_single_series): a halving at index 10.
HUNTER_SERIES = [1.02, 0.95, 0.99, 1.00, 1.12, 1.00, 1.01, 0.98, 1.01, 0.96,
                 0.50, 0.51, 0.48, 0.48, 0.55, 0.50, 0.49, 0.51, 0.50, 0.49]
# Otava's tests/change_point_divisive_test.py: two steps, at 5 and 8.
OTAVA_SEQUENCE = [0.3, 2.4, 1.5, -0.9, -0.5, 99.7, 98.3, 99.1,
                  149.0, 149.7, 149.5, 149.1, 148.8, 150.0]


def test_hunter_single_series_has_one_change_at_10():
    # hunter/otava: compute_change_points(series, window_len=10, max_pvalue=0.0001) == [10]
    params = replace(HUNTER, window_len=10, max_pvalue=0.0001)
    assert [c.index for c in change_points(HUNTER_SERIES, params)] == [10]
    assert [c.index for c in change_points(np.log(HUNTER_SERIES))] == [10]  # perf's defaults


def test_hunter_significance_tester_pvalues():
    # hunter/otava test_significance_tester: no change -> p ~ 1; a 20% drop -> p < 0.001
    same = np.array([1.00, 1.02, 1.05, 0.95, 0.98, 1.00, 1.02, 1.05, 0.95, 0.98])
    drop = np.array([1.00, 1.02, 1.05, 0.95, 0.98, 0.80, 0.82, 0.85, 0.79, 0.77])
    for ddof in (0, 1):
        assert 0.99 < ttest(same[:5], same[5:], ddof) < 1.01
        assert 0.0 < ttest(drop[:5], drop[5:], ddof) < 0.001


def test_otava_sequence_splits_at_5_and_8():
    # otava test_ttest: ChangePointDetector(TTestSignificanceTester(0.01)) -> [5, 8]
    x = np.array(OTAVA_SEQUENCE)
    assert e_divisive(x, 0.01, HUNTER) == [5, 8]


def _qhat_slow(z, tau, kappa):
    """Q-hat of X = z[:tau], Y = z[tau:kappa] written from Matteson & James (2014), eq. (3)."""
    x, y = z[:tau], z[tau:kappa]
    n, m = len(x), len(y)
    between = sum(abs(a - b) for a in x for b in y) * 2 / (n * m)
    within_x = sum(abs(x[i] - x[k]) for i in range(n) for k in range(i + 1, n))
    within_y = sum(abs(y[j] - y[k]) for j in range(m) for k in range(j + 1, m))
    e = between - (within_x / math.comb(n, 2) if n > 1 else 0) \
        - (within_y / math.comb(m, 2) if m > 1 else 0)
    return n * m / (n + m) * e


def test_qhat_candidate_is_the_maximum_of_the_slow_formula():
    rng = np.random.default_rng(1)
    for z in (np.array(OTAVA_SEQUENCE), rng.normal(size=17), np.r_[rng.normal(size=9), 3.0]):
        slow = {(t, k): _qhat_slow(z, t, k) for t in range(1, len(z))
                for k in range(t + 1, len(z) + 1)}
        (t, k), best = max(slow.items(), key=lambda kv: kv[1])
        tau, q, _ = qhat_candidate(z, 0, len(z))
        assert q == pytest.approx(best) and tau == t


@pytest.mark.parametrize("case", json.loads((DATA / "otava_tigerbeetle.json").read_text())["cases"],
                         ids=lambda c: f"p{c['max_pvalue']}-m{c['min_magnitude']}")
def test_otava_tigerbeetle_series(case):
    """The published results of Otava's tests/tigerbeetle_test.py (365 points, source in the data
    file) replay exactly with Otava's settings (HUNTER)."""
    data = json.loads((DATA / "otava_tigerbeetle.json").read_text())
    params = replace(HUNTER, window_len=data["window_len"], max_pvalue=case["max_pvalue"],
                     min_magnitude=case["min_magnitude"])
    assert [c.index for c in change_points(data["series"], params)] == case["indexes"]


def _steps(rng, n, k, sd):
    """A series of ``n`` log values with ``k`` steps of 20-40% (either sign), >= 8 apart."""
    while True:
        bkps = sorted(rng.choice(np.arange(8, n - 7), size=k, replace=False).tolist())
        if all(b - a >= 8 for a, b in zip(bkps, bkps[1:])):
            break
    level, x, start = 0.0, np.empty(n), 0
    for b in [*bkps, n]:
        x[start:b] = level
        level += rng.choice([-1, 1]) * rng.uniform(math.log(1.2), math.log(1.4))
        start = b
    return x + rng.normal(0, sd, n), bkps


@pytest.mark.parametrize("seed", range(20))
def test_agrees_with_ruptures_on_synthetic_steps(seed):
    """ruptures' exact least-squares segmentation (Dynp, l2) given the true number of steps
    places them where ours does, within one point; ours finds that number on its own."""
    rng = np.random.default_rng(seed)
    n, k = int(rng.integers(40, 120)), int(rng.integers(1, 4))
    x, truth = _steps(rng, n, k, sd=0.04)
    ours = [c.index for c in change_points(x)]
    theirs = ruptures.Dynp(model="l2", min_size=2, jump=1).fit(x).predict(n_bkps=k)[:-1]
    assert len(ours) == k, (ours, truth)
    assert all(abs(a - b) <= 1 for a, b in zip(ours, theirs)), (ours, theirs, truth)
    assert all(abs(a - b) <= 2 for a, b in zip(ours, truth)), (ours, truth)


def _replays(step: bool):
    """100 seeded 40-point series, log sd 3-5%, a 15% step at point 25 when ``step``."""
    for seed in range(100):
        rng = np.random.default_rng(1000 + seed)
        x = rng.normal(0, rng.uniform(0.03, 0.05), 40)
        if step:
            x[25:] += math.log(1.15)
        yield change_points(x)


def test_a_15_percent_step_is_found_in_at_least_95_of_100_replays():
    hits = sum(len(cps) == 1 and abs(cps[0].index - 25) <= 2 for cps in _replays(step=True))
    assert hits >= 95, hits


def test_no_change_point_in_100_replays_without_a_step():
    assert sum(len(cps) for cps in _replays(step=False)) == 0


def test_hunter_settings_false_alarm_rate_is_why_perf_defaults_differ():
    """Hunter's own settings on the same noise alarm in a few % of series (documented in the
    module's Note); perf's defaults do not. Pinned so the Note stays true."""
    hunter = replace(HUNTER, magnitude="difference", min_after=2)
    alarms = sum(bool(change_points(np.random.default_rng(s).normal(0, 0.05, 40), hunter))
                 for s in range(300))
    assert alarms >= 3


def test_a_change_needs_two_points_after_it():
    x = np.r_[np.zeros(30), [0.5]] + np.random.default_rng(0).normal(0, 0.01, 31)
    assert change_points(x) == []
    x = np.r_[x, [0.5]]
    assert [c.index for c in change_points(x)] == [30]


def test_exact_series_change_at_any_difference():
    counts = [50.0] * 10 + [51.0] * 5
    [c] = change_points(counts, replace(DEFAULT, min_magnitude=0.0))
    assert isinstance(c, ChangePoint) and c.index == 10 and c.pvalue == 0.0


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="finite"):
        change_points([1.0, float("nan"), 2.0])


@functools.lru_cache(maxsize=1)
def _recorded_rates() -> dict[str, dict]:
    """perf.gate.replays on what this repository recorded: the quiet history runs since the
    machine annotation."""
    runs = replays.since_machine_change(store.load_runs(suite="quick"),
                                        store.load_annotations())
    return replays.all_rates(runs)


# Session 12 left one series of 56 outside the rule: lgamma_graph's ~2 ms conversion phase,
# 87 of 100, while a run's statistic was the minimum of its 9 samples (log sd 0.078 over 30
# runs at one commit). Its 3 rounds' minima differ as much as whole runs do, so that minimum
# followed the luckiest server; the mean of the round minima (store.Series.statistic,
# Note [Round minimum]) moves 0.050 and meets the rule (100/100). Out of sample it moved
# 0.060, at the rule's edge on Gaussian noise (95%). docs/regressions.md


def test_steps_in_recorded_noise_are_found_and_pure_noise_gives_none():
    """Issue 23's replay rule on recorded series: each gated series' run-to-run noise as
    this machine recorded it (>= 40 quiet runs), replayed in 100 seeded orders of 40 runs
    each; a 15% step at point 25 is found (one change, within 2 points) in >= 95 of them,
    and none of the 100 without a step shows a change."""
    rates = _recorded_rates()
    assert len(rates) >= 56, sorted(rates)
    missed = {n: r for n, r in rates.items() if r["found"] < 95 or r["false_changes"]}
    assert not missed


def test_a_replay_takes_each_recorded_run_at_most_once():
    """40 distinct deviations: every replay without a step is a reordering of them, so a
    single outlying run (a disturbed one the canary missed) can never stand twice in a
    row and pass for a change."""
    devs = [0.0] * 39 + [0.3]  # one run 35% slow: alone it is no change (>= 2 points after)
    assert replays.replay_rates(devs, "cpu")["false_changes"] == 0
    with pytest.raises(ValueError, match="40 recorded runs"):
        replays.replay_rates(devs[:39], "cpu")
