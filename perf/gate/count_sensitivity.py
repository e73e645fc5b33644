"""Sensitivity of the count tier (issue 38, item 3): test-only extra interpreted work of
2-50% (perf/gate/counting.py's burn, counted as our own code's) injected at once into one
compile phase (PHASE_MODEL's PHASE), one whole compile (every phase of WHOLE_MODEL) and one
converter family (FAMILY); each effect size, and 0 (the unchanged tree), is counted in fresh
processes of a count server, screened against the history and its suspects re-counted in
fresh processes of a second server, as ``perf gate`` does (a trial opens its two servers
once for all effect sizes: counts repeat exactly, so a server is not a unit of noise here).
Every series the injections do not aim at is a control.
Writes perf-data/results/count_sensitivity.json; tests/test_perf_counts.py re-judges it.

    python -m perf.gate.count_sensitivity --trials 3
    python -m perf.gate.count_sensitivity --plot docs/img/sensitivity.png  # draw only
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from pathlib import Path

from matplotlib.figure import Figure

from . import noise, rules, store, suites
from .runner import count_suite, say
from .sensitivity import replayed, slowed_compiles
from .sensitivity import summarize as summarize_trials
from .verdict import GateRun, recount_run
from .worker import CountPool

OUT = store.DATA / "results" / "count_sensitivity.json"
EFFECTS = (0.0, 0.02, 0.05, 0.10, 0.20, 0.30, 0.50)


def injections(args, effect: float) -> dict[str, dict]:
    if not effect:
        return {}
    return {f"compile:{args.phase_model}": {"count_more": effect, "phase": args.phase},
            f"compile:{args.whole_model}": {"count_more": effect, "phase": "*"},
            f"family:{args.family}": {"count_more": effect, "family": args.family}}


def targets(args) -> dict[str, str]:
    """Scenario -> the series it must make REGRESSED."""
    return {"phase": f"compile/{args.phase_model}/ops/{args.phase}",
            "compile": f"compile/{args.whole_model}/ops/total",
            "family": f"family/{args.family}/ops"}


def aimed(series: str, args) -> bool:
    """Whether an injection aims at ``series`` (its group's counts that the extra work
    moves): not a control."""
    return (series.startswith(f"compile/{args.whole_model}/")
            or series in {f"compile/{args.phase_model}/{k}/{p}" for k in ("ops", "calls")
                          for p in (args.phase, "total")}
            or series.startswith(f"family/{args.family}/"))


def trial(args, suite, runs, calibration, annotations, effect: float, pools) -> dict:
    inject = injections(args, effect)
    first, second = (lambda p=p: contextlib.nullcontext(p) for p in pools)
    current = count_suite(suite, first, inject=inject)
    rows = rules.screen(current, runs, calibration, annotations)
    run = recount_run(GateRun(rows, current=current), suite, second, inject=inject, out=say)
    return {"effect": effect, "regressed": [r.name for r in run.counted],
            "suspects": [r.name for r in rules.count_suspects(rows)],
            "ratios": {name: next(r.ratio for r in rows if r.name == name)
                       for name in targets(args).values()},
            "new": sum(r.verdict == "new" for r in rows)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m perf.gate.count_sensitivity",
                                description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trials", type=int, default=3)
    p.add_argument("--effects", default=",".join(f"{e:g}" for e in EFFECTS))
    p.add_argument("--phase-model", default="bert_2layer")
    p.add_argument("--phase", default="lowering")
    p.add_argument("--whole-model", default="resnet18")
    p.add_argument("--family", default="elementwise")
    p.add_argument("--history", type=Path, default=store.HISTORY_DIR)
    p.add_argument("--out", type=Path, default=OUT)
    p.add_argument("--plot", type=Path, default=None,
                   help="measure nothing: draw --out's curve and the time tier's recorded "
                        "points (--time FILE ...) into this PNG")
    p.add_argument("--time", type=Path, nargs="*", default=[],
                   help="perf.gate.sensitivity results to draw as the time tier's points")
    args = p.parse_args(argv)
    if args.plot:
        plot(json.loads(args.out.read_text()), [json.loads(t.read_text()) for t in args.time],
             args.plot)
        return 0
    suite = suites.suite("quick")
    runs = store.load_runs(args.history, suite=suite.name)
    calibration, annotations = noise.load_calibration(), store.load_annotations(args.history)
    effects = [float(e) for e in args.effects.split(",")]
    results = {"params": {"effects": effects, "targets": targets(args),
                          "injections": {f"{e:g}": injections(args, e) for e in effects},
                          "phase_model": args.phase_model, "whole_model": args.whole_model,
                          "phase": args.phase, "family": args.family,
                          "min_effect": rules.MIN_EFFECT["work"],
                          "screen_spreads": rules.SCREEN_SPREADS},
               "trials": []}
    started = time.monotonic()
    for i in range(args.trials):
        with CountPool(models=suite.built) as a, CountPool(models=suite.built) as b:
            for effect in effects:
                say(f"trial {i + 1}/{args.trials}, effect {effect:g} "
                    f"({time.monotonic() - started:.0f} s)")
                load = os.getloadavg()[0]
                found = trial(args, suite, runs, calibration, annotations, effect, (a, b))
                results["trials"].append({"trial": i, "load": load, **found})
                results["seconds"] = round(time.monotonic() - started)
                args.out.parent.mkdir(parents=True, exist_ok=True)
                args.out.write_text(json.dumps(results, indent=1) + "\n")
    print(json.dumps(summarize(results, args), indent=1))
    return 0


def summarize(results: dict, args=None) -> dict:
    """Per scenario and effect size, the trials whose target was REGRESSED; per effect size,
    the control series REGRESSED (any series no injection aimed at)."""
    params = results["params"]
    goals = params["targets"]
    args = args or argparse.Namespace(**{k: params[k] for k in
                                         ("phase_model", "phase", "whole_model", "family")})
    out: dict = {"flagged": {}, "controls_regressed": {}, "trials": {}}
    for t in results["trials"]:
        key = f"{t['effect']:g}"
        out["trials"][key] = out["trials"].get(key, 0) + 1
        for scenario, series in goals.items():
            cell = out["flagged"].setdefault(scenario, {})
            cell[key] = cell.get(key, 0) + (series in t["regressed"])
        controls = [s for s in t["regressed"] if not (t["effect"] and aimed(s, args))]
        out["controls_regressed"][key] = out["controls_regressed"].get(key, 0) + len(controls)
    return out


# scenario of a perf.gate.sensitivity file -> (its point in the plot, the parameter of its size)
TIME_SCENARIOS = {"family": ("family", "family_slower"), "lowering": ("phase", "lowering_slower"),
                  "memory": ("memory", "rss_more"), "latency": ("latency", "latency_slower")}


def time_points(results: dict) -> list[tuple[str, float, int, int]]:
    """(scenario, effect, trials REGRESSED, trials) of one perf.gate.sensitivity file, as its
    ``summarize`` counts them; the lowering scenario is the count tier's "phase"; the whole
    compile is each slowed model's total on its own (``slowed_compiles``); an unchanged
    tree's trials are one "control" point at 0 (trials with any series REGRESSED: false
    alarms)."""
    params, trials = results["params"], results["trials"]
    if not trials:
        return []
    if params.get("control"):
        return [("control", 0.0, sum(bool(t["regressed"]) for t in trials), len(trials))]
    found, n = summarize_trials(results), len(trials)
    totals = {k: found["compile_by_series"][k] for k in slowed_compiles(params["targets"])}
    points = [("compile", params.get("compile_slower", 0.3), sum(totals.values()),
               n * len(totals))]
    for scenario, (point, size) in TIME_SCENARIOS.items():
        if scenario in found["flagged"]:
            points.append((point, params.get(size, 0.2), found["flagged"][scenario], n))
    return points


def pooled(time_results: list[dict]) -> dict[tuple[str, float], list[int]]:
    """(scenario, effect) -> [trials REGRESSED, trials] over every recorded file."""
    cells: dict[tuple[str, float], list[int]] = {}
    for recorded in time_results:
        for scenario, effect, hits, n in time_points(recorded):
            cell = cells.setdefault((scenario, effect), [0, 0])
            cell[0] += hits
            cell[1] += n
    return cells


def plot(results: dict, time_results: list[dict], path: Path) -> Path:
    """Fraction of trials REGRESSED against the injected effect: the count tier's lines,
    the time tier's recorded points (hollow, pooled over the files given)."""
    found = summarize(results)
    fig = Figure(figsize=(6.4, 3.4), dpi=100)
    ax = fig.add_subplot()
    colors = {"phase": "#1f77b4", "compile": "#d62728", "family": "#2ca02c",
              "memory": "#9467bd", "latency": "#ff7f0e", "control": "#7f7f7f"}
    styles = {"phase": ("o-", 9), "compile": ("s--", 6), "family": ("^:", 4)}  # they overlap
    for scenario, cells in found["flagged"].items():
        effects = sorted((float(k), v / found["trials"][k]) for k, v in cells.items())
        ax.plot([100 * e for e, _ in effects], [f for _, f in effects], styles[scenario][0],
                ms=styles[scenario][1], color=colors[scenario], label=f"count tier: {scenario}")
    replay_styles = {"total": ("#d62728", "-."), "phase": ("#1f77b4", "-."),
                     "latency": ("#ff7f0e", "-.")}
    for cls, cells in replayed(time_results).items():
        effects = sorted(cells)
        ax.plot([100 * e for e in effects],
                [cells[e]["regressed"] / cells[e]["pairs"] for e in effects],
                replay_styles[cls][1], lw=1, color=replay_styles[cls][0], alpha=0.7,
                label=f"time tier replayed: {cls} ({cells[effects[0]]['pairs']} A/B pairs)")
    for (scenario, effect), (hits, n) in sorted(pooled(time_results).items()):
        ax.scatter([100 * effect], [hits / n], s=60, facecolors="none",
                   edgecolors=colors[scenario], label=f"time tier: {scenario} +{effect:.0%} "
                   f"({hits}/{n})")
    ax.set_xscale("symlog", linthresh=2)
    ax.set_xticks([0, 2, 5, 10, 20, 30, 50])
    ax.set_xticklabels(["0", "2", "5", "10", "20", "30", "50"])
    ax.set_xlabel("injected extra work / CPU time (%)")
    ax.set_ylabel("fraction of trials REGRESSED")
    ax.set_ylim(-0.05, 1.05)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=6, loc="center left", bbox_to_anchor=(1.01, 0.5))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, bbox_inches="tight")
    return path


if __name__ == "__main__":
    sys.exit(main())
