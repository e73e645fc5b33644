"""Change-point replays on recorded noise (issue 23, "History"): each gated time or memory
series' run-to-run deviations, as quiet perf-data/history runs since the last machine
annotation recorded them (each against the median of its commit's runs), replayed: each
replay takes POINTS of the recorded runs in a seeded random order, every run at most once,
as a history would hold them. With a 15% step added from point 25 the detector must find
one change within 2 points of it; without one it must find none.

Runs marked loaded (started under load, or disturbed: gate.disturbance) are left out, as
the noise model and the change points leave them out. A series with fewer than POINTS
recorded runs is not replayed.

    python -m perf.gate.replays     # per-series rates, written to perf-data/results/replays.json
"""

from __future__ import annotations

import json
import math
import statistics
import sys

import numpy as np

from . import store
from .changepoints import change_points, params_for
from .rules import MIN_EFFECT
from .suites import is_canary

RESULTS = store.DATA / "results"
POINTS, STEP_AT, STEP = 40, 25, 1.15
MIN_RUNS_AT_A_COMMIT = 3  # fewer runs than this at a commit: no median to deviate from


def recorded_deviations(runs: list[store.Run]) -> dict[str, list[float]]:
    """Per gated series, the log deviation of each quiet run's statistic from the median of
    its commit's quiet runs."""
    by_commit: dict[tuple[str, str], list[float]] = {}
    for run in runs:
        if run.loaded:
            continue
        for name, s in run.series.items():
            if s.type in MIN_EFFECT and not is_canary(name) and s.statistic() > 0:
                by_commit.setdefault((name, run.commit), []).append(math.log(s.statistic()))
    out: dict[str, list[float]] = {}
    for (name, _), logs in by_commit.items():
        if len(logs) >= MIN_RUNS_AT_A_COMMIT:
            m = statistics.median(logs)
            out.setdefault(name, []).extend(v - m for v in logs)
    return out


def replay_rates(deviations: list[float], type_: str, replays: int = 100,
                 seed: int = 0) -> dict:
    """How often a 15% step at point 25 of 40 is found (one change, within 2 points), and
    how many changes appear without a step, over ``replays`` seeded orderings of POINTS of
    the recorded deviations (each at most once)."""
    if len(deviations) < POINTS:
        raise ValueError(f"a replay needs {POINTS} recorded runs, got {len(deviations)}")
    rng = np.random.default_rng(seed)
    pool = np.asarray(deviations) - statistics.median(deviations)
    params = params_for(type_)
    found = false = 0
    for _ in range(replays):
        x = rng.choice(pool, POINTS, replace=False)
        false += len(change_points(x, params))
        stepped = x.copy()
        stepped[STEP_AT:] += math.log(STEP)
        cps = change_points(stepped, params)
        found += len(cps) == 1 and abs(cps[0].index - STEP_AT) <= 2
    return {"replays": replays, "found": found, "false_changes": false,
            "recorded": len(deviations), "sd": float(np.std(pool, ddof=1))}


def since_machine_change(runs: list[store.Run], annotations: list[dict]) -> list[store.Run]:
    """The runs from the newest ``machine`` annotation's commit on (older runs were measured
    on another machine, or under other conditions)."""
    marks = [a["commit"] for a in annotations if a["action"] == "machine"]
    if not marks:
        return runs
    first = next((i for i, r in enumerate(runs) if store.commit_matches(r.commit, marks[-1])),
                 len(runs))
    return runs[first:]


def all_rates(runs: list[store.Run]) -> dict[str, dict]:
    """Replay rates of every gated series with at least POINTS recorded quiet runs."""
    types = {n: s.type for r in runs for n, s in r.series.items()}
    recorded = {n: d for n, d in sorted(recorded_deviations(runs).items()) if len(d) >= POINTS}
    return {name: replay_rates(devs, types[name], seed=i)
            for i, (name, devs) in enumerate(recorded.items())}


def main() -> int:
    runs = since_machine_change(store.load_runs(suite="quick"), store.load_annotations())
    rates = all_rates(runs)
    if not rates:
        print(f"no series has {POINTS} quiet recorded runs since the last machine annotation; "
              "record more (torch-trt-ref perf calibrate --runs N)", file=sys.stderr)
        return 1
    (RESULTS / "replays.json").write_text(json.dumps(rates, indent=1) + "\n")
    for name, r in rates.items():
        print(f"{name:50s} sd {r['sd']:.3f} n {r['recorded']:3d}: step found "
              f"{r['found']}/{r['replays']}, changes without a step {r['false_changes']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
