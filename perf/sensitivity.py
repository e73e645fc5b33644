"""Sensitivity of the gate (issue 23, "What it must show"), run where REGRESSED is decided:
the confirmation step, A (this tree, with a test-only slowdown from perf/inject.py) against
B (HEAD checked out as a git worktree, nothing injected), ABBA, 6 processes each.

- family: converter family FAMILY made 20% slower; controls: family CONTROL, unchanged;
- compile: the whole compile() of MODEL made 30% slower (series cpu/total); the group's
  other noisy series (CPU per phase, peak RSS, latency) are unchanged: controls;
- unsupported: OP made unsupported in MODEL2; the exact path (work counters screened
  against perf/history) must flag it every time.

Writes perf/results/sensitivity.json with every trial's samples; tests/test_perf_gate.py
re-judges them (the verdict rule end to end on recorded samples with known answers)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from . import gate, history
from .confirm import base_checkout, confirm_group
from .runner import say
from .worker import ROOT, Pool

OUT = ROOT / "perf" / "results" / "sensitivity.json"


def _trial(group, names, pool_a, pool_b, inject, each):
    load = os.getloadavg()[0]
    start = time.monotonic()
    found = confirm_group(group, names, pool_a, pool_b, each or gate.ab_each(group), inject)
    return {"group": group, "inject": inject, "load_start": load,
            "load_end": os.getloadavg()[0], "seconds": round(time.monotonic() - start, 1),
            "series": {c.name: {"type": c.type, "a": c.a, "b": c.b, "pvalue": c.pvalue,
                                "ratio": c.ratio, "regressed": c.regressed} for c in found}}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m perf.sensitivity", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trials", type=int, default=20)
    p.add_argument("--family", default="elementwise")
    p.add_argument("--control", default="unary")
    p.add_argument("--model", default="lgamma_graph")
    p.add_argument("--model2", default="unconvertible")
    p.add_argument("--op", default="aten.relu.default")
    p.add_argument("--each", type=int, default=None,
                   help="processes per side (default gate.ab_each of the group)")
    p.add_argument("--out", type=Path, default=OUT)
    p.add_argument("--only", nargs="*", default=["family", "compile", "unsupported"])
    args = p.parse_args(argv)
    results: dict = {"params": {**vars(args), "out": str(args.out), **gate.PARAMS},
                     "experiments": {}}
    runs = history.load_runs(suite="quick")
    started = time.monotonic()
    with Pool(log=Path("/tmp/perf-sensitivity.log")) as pool_a, \
            base_checkout("HEAD") as tree, Pool(tree) as pool_b:
        fam = {"family": args.family, "slower": 0.2}
        comp = {"compile_slower": 0.3}
        series = [f"compile/{args.model}/{s}" for s in
                  ("cpu/total", "cpu/capture", "cpu/lowering", "cpu/partition",
                   "cpu/conversion", "cpu/build", "rss/peak", "latency")]
        for name in args.only:
            trials = []
            for i in range(args.trials):
                say(f"{name}: trial {i + 1}/{args.trials} ({time.monotonic() - started:.0f} s)")
                if name == "family":
                    trials.append([
                        _trial(f"family:{args.family}", [f"family/{args.family}/cpu"],
                               pool_a, pool_b, fam, args.each),
                        _trial(f"family:{args.control}", [f"family/{args.control}/cpu"],
                               pool_a, pool_b, None, args.each)])
                elif name == "compile":
                    trials.append([_trial(f"compile:{args.model}", series, pool_a, pool_b,
                                          comp, args.each)])
                else:
                    measured = pool_a.measure(f"compile:{args.model2}", {"unsupported": args.op})
                    current = {n: history.Series(n, v["unit"], v["type"], [v["value"]])
                               for n, v in measured.items() if v["type"] == "count"}
                    rows = gate.screen(current, runs)
                    trials.append({"regressed": [r.name for r in rows
                                                 if r.verdict == "REGRESSED"]})
                results["experiments"][name] = trials  # written after every trial
                results["seconds"] = round(time.monotonic() - started)
                args.out.parent.mkdir(parents=True, exist_ok=True)
                args.out.write_text(json.dumps(results, indent=1) + "\n")
    results["seconds"] = round(time.monotonic() - started)
    args.out.write_text(json.dumps(results, indent=1) + "\n")
    print(json.dumps(summarize(results), indent=1))
    return 0


def summarize(results: dict) -> dict:
    """Per experiment: trials, how often the injected series and each control regressed."""
    out = {}
    for name, trials in results["experiments"].items():
        if name == "unsupported":
            out[name] = {"trials": len(trials), "flagged": sum(bool(t["regressed"])
                                                               for t in trials)}
            continue
        counts: dict[str, int] = {}
        for trial in trials:
            for part in trial:
                for series, verdict in part["series"].items():
                    counts[series] = counts.get(series, 0) + bool(verdict["regressed"])
        out[name] = {"trials": len(trials), "regressed": counts}
    return out


if __name__ == "__main__":
    sys.exit(main())
