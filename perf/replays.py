"""Change-point replays on recorded noise (issue 23, "History"): each gated time or memory
series' run-to-run deviations, taken from quiet runs this machine recorded (perf/history
runs since the last machine annotation, each against its commit's median, and the series
of the whole-gate sensitivity trials in perf/results/sensitivity.json), are redrawn
into 40-point series, seeded; with a 15% step added from point 25 the detector must find
one change within 2 points of it, without one it must find none.

    python -m perf.replays            # per-series rates, written to perf/results/replays.json
"""

from __future__ import annotations

import json
import math
import statistics
import sys
from pathlib import Path

import numpy as np

from . import history
from .changepoints import change_points, params_for
from .gate import CANARY_SERIES, MIN_EFFECT

RESULTS = Path(__file__).parent / "results"
POINTS, STEP_AT, STEP = 40, 25, 1.15
MIN_DEVIATIONS = 15  # fewer recorded runs than this: too little noise to redraw from


def recorded_deviations(runs: list[history.Run],
                        trials: list[dict] | None = None) -> dict[str, list[float]]:
    """Per gated series, log deviations of each quiet run's statistic from the median of
    its commit's runs, and of the log ratio each sensitivity trial screened from the median
    of the trials (one commit)."""
    by_commit: dict[tuple[str, str], list[float]] = {}
    for run in runs:
        if run.loaded:
            continue
        for name, s in run.series.items():
            if s.type in MIN_EFFECT and name != CANARY_SERIES and s.statistic() > 0:
                by_commit.setdefault((name, run.commit), []).append(math.log(s.statistic()))
    measured = {name for name, _ in by_commit}
    for trial in trials or []:  # one commit: their own group, whatever their baseline was
        for name, row in trial["screen"].items():
            if name in measured and row["ratio"]:
                by_commit.setdefault((name, "trials"), []).append(math.log(row["ratio"]))
    out: dict[str, list[float]] = {}
    for (name, _), logs in by_commit.items():
        if len(logs) >= 3:
            m = statistics.median(logs)
            out.setdefault(name, []).extend(v - m for v in logs)
    return {n: v for n, v in out.items() if len(v) >= MIN_DEVIATIONS}


def replay_rates(deviations: list[float], type_: str, replays: int = 100,
                 seed: int = 0) -> dict:
    """How often a 15% step at point 25 of 40 is found (one change, within 2 points), and
    how many changes appear without a step, over ``replays`` seeded redraws."""
    rng = np.random.default_rng(seed)
    pool = np.asarray(deviations) - statistics.median(deviations)
    params = params_for(type_)
    found = false = 0
    for _ in range(replays):
        x = rng.choice(pool, POINTS, replace=True)
        false += len(change_points(x, params))
        stepped = x.copy()
        stepped[STEP_AT:] += math.log(STEP)
        cps = change_points(stepped, params)
        found += len(cps) == 1 and abs(cps[0].index - STEP_AT) <= 2
    return {"replays": replays, "found": found, "false_changes": false,
            "recorded": len(deviations), "sd": float(np.std(pool, ddof=1))}


def since_machine_change(runs: list[history.Run], annotations: list[dict]) -> list[history.Run]:
    """The runs from the newest ``machine`` annotation's commit on (older runs were measured
    on another machine, or under other conditions)."""
    marks = [a["commit"] for a in annotations if a["action"] == "machine"]
    if not marks:
        return runs
    first = next((i for i, r in enumerate(runs) if history.commit_matches(r.commit, marks[-1])),
                 len(runs))
    return runs[first:]


def all_rates(runs: list[history.Run], sensitivity: dict | None) -> dict[str, dict]:
    """Replay rates of every gated series. The sensitivity trials' series count whether an
    injection touched them or not: an injection moves every trial alike (a compile 30%
    slower spins in proportion to its own CPU time, so its log deviations are the
    uninjected ones), and deviations are taken from the trials' own median; what an
    injection adds (the family's per-process spin calibration) is noise, never less."""
    trials = sensitivity["trials"] if sensitivity else []
    types = {n: s.type for r in runs for n, s in r.series.items()}
    return {name: replay_rates(devs, types[name], seed=i) for i, (name, devs) in
            enumerate(sorted(recorded_deviations(runs, trials).items()))}


def main() -> int:
    path = RESULTS / "sensitivity.json"
    sensitivity = json.loads(path.read_text()) if path.exists() else None
    runs = since_machine_change(history.load_runs(suite="quick"), history.load_annotations())
    rates = all_rates(runs, sensitivity)
    (RESULTS / "replays.json").write_text(json.dumps(rates, indent=1) + "\n")
    for name, r in rates.items():
        print(f"{name:50s} sd {r['sd']:.3f} n {r['recorded']:3d}: step found "
              f"{r['found']}/{r['replays']}, changes without a step {r['false_changes']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
