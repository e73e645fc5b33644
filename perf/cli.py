"""``torch-trt-ref perf run|calibrate|gate|history``: measure a suite (and record it in
perf-data/history), calibrate the noise model, gate the working tree against history with A/B
confirmation of suspects, and the history commands (perf/gate/dashboard.py)."""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import sys
import time
from pathlib import Path

from torch_trt_ref.commands import number

from .gate import noise, rules, steps, store, suites
from .gate.confirm import base_checkout, resolve_commit
from .gate.dashboard import add_history_subcommand
from .gate.runner import (
    LOAD_LIMIT_PER_CORE,
    MAX_WAIT,
    as_records,
    count_suite,
    header,
    revision,
    run_suite,
    say,
    wait_for_quiet,
)
from .gate.verdict import (
    TIERS,
    ab_screen,
    add_series,
    confirm_run,
    recount_run,
    screen_run,
    start_counts,
)
from .gate.worker import CountPool, Pool


def _record(args, series, load_start, loaded, rev) -> Path:
    """Write the run to history; marked loaded when it started under load or ran on a
    disturbed machine (its cold canary moved: gate.disturbance)."""
    disturbed = rules.disturbance(series, store.load_runs(args.history, suite=args.suite),
                                  store.load_annotations(args.history))
    head = header(args.suite, load_start, list(os.getloadavg()), loaded or bool(disturbed),
                  rev)
    if disturbed:
        head["disturbed"] = {"cold_canary": round(disturbed, 4)}
    path = store.write_run(head, as_records(series), args.history)
    why = (f"disturbed: cold canary x{disturbed:.2f}" if disturbed
           else "started under load" if loaded else "")
    say(f"recorded {path}" + (f" (marked loaded: {why})" if why else ""))
    return path


def _measure(args, suite, pool_factory, count_factory) -> dict:
    """The series of one run: the time tier, then the count tier (``--tiers``)."""
    series = {}
    if "time" in args.tiers:
        series.update(run_suite(suite, lambda: pool_factory(None, args.log), args.processes))
    if "counts" in args.tiers:
        series.update(count_suite(suite, lambda: count_factory(None, args.log, suite.built)))
    return series


def _calibration_runs(args, pool_factory, count_factory) -> list[Path]:
    """Record --runs quiet reruns at this commit; their paths."""
    suite = suites.suite(args.suite)
    rev = revision()  # every calibration run is labelled with the commit it started at
    paths = []
    for i in range(args.runs):
        say(f"calibration run {i + 1}/{args.runs}")
        load_start, loaded = wait_for_quiet(args.max_wait, args.load_limit)
        series = _measure(args, suite, pool_factory, count_factory)
        paths.append(_record(args, series, load_start, loaded, rev))
    return paths


def run_command(args, pool_factory=Pool, count_factory=CountPool) -> int:
    suite = suites.suite(args.suite)
    rev = revision()
    load_start, loaded = wait_for_quiet(args.max_wait, args.load_limit)
    series = _measure(args, suite, pool_factory, count_factory)
    for s in series.values():
        print(f"{s.name:60s} {s.statistic():12.6g} {s.unit:4s} ({len(s.samples)} samples)")
    if args.json:
        Path(args.json).write_text(json.dumps(as_records(series), indent=1) + "\n")
    if args.record:
        _record(args, series, load_start, loaded, rev)
    return 0


def calibrate_command(args, pool_factory=Pool, count_factory=CountPool) -> int:
    if args.from_history:  # the recorded runs again (e.g. after the statistic changed)
        runs = [r for r in store.load_runs(args.history, suite=args.suite)
                if store.commit_matches(r.commit, args.from_history)]
        if not runs:
            raise ValueError(f"no {args.suite} run at commit {args.from_history!r} in "
                             f"{args.history}; give a commit that perf calibrate recorded")
        calibration = noise.calibrate(runs)
    else:
        calibration = noise.calibrate([store.read_run(p) for p in _calibration_runs(
            args, pool_factory, count_factory)])
    out = noise.write_calibration(calibration, args.noise)
    unstable = sorted(n for n, e in calibration["series"].items()
                      if e["spread"] > noise.UNSTABLE)
    print(f"wrote {out}: {len(calibration['series'])} series, {len(unstable)} unstable "
          f"(spread > {noise.UNSTABLE}): {', '.join(unstable) or 'none'}")
    return 0


def check_gate_args(args) -> None:
    """Every argument of ``perf gate`` checked before anything is measured (a bad one fails
    in a second, not after the screen): argparse's number types range-check the counts,
    then --ab-each must be even (ABBA order) and --base a commit of this clone (resolved to
    its hash)."""
    if args.ab_each is not None and args.ab_each % 2:
        raise ValueError(f"--ab-each must be a positive even number of processes per side "
                         f"(ABBA order), got {args.ab_each}")
    if args.base:
        args.base = resolve_commit(args.base)


def gate_command(args, pool_factory=Pool, checkout=base_checkout, out=print,
                 count_factory=CountPool) -> int:
    check_gate_args(args)
    suite = suites.suite(args.suite)
    runs = store.load_runs(args.history, suite=suite.name)
    if not runs:
        raise ValueError(f"no history of suite {suite.name!r} in {args.history}; record runs "
                         f"first (torch-trt-ref perf run --suite {suite.name} --record)")
    calibration = noise.load_calibration(args.noise)
    annotations = store.load_annotations(args.history)
    started = time.monotonic()
    load_start, _ = wait_for_quiet(args.max_wait, args.load_limit)
    with pool_factory(None, args.log) as pool, contextlib.ExitStack() as stack:
        # the screen opens new servers each round; ``pool`` (side A) starts on first use
        def count_pool():
            return count_factory(None, args.log, suite.built)

        run = screen_run(suite, lambda: pool_factory(None, args.log), runs, calibration,
                         annotations, args.processes, max_suspects=args.max_suspects,
                         tiers=tuple(t for t in args.tiers if t != "counts"))
        # the count tier runs beside the A/B screen: a count does not depend on the load
        counted = start_counts(suite, count_pool) if "counts" in args.tiers else None
        base = args.base or runs[-1].commit
        if not args.base and not steps.same_code(base, "HEAD"):
            out(stale_history_note(base, suite.name))
        trees: list = []  # the base's checkout, made once, on first use

        def base_tree():
            trees.append(trees[0] if trees else stack.enter_context(checkout(base)))
            return trees[0]

        if run.foreign and "time" in args.tiers:
            out(f"not the history's machine: the canary moved x{run.foreign:.2f}; every "
                f"compile series is screened A/B against {base[:10]} in this run (ABBA, "
                f"{args.ab_each or rules.AB_EACH} processes a side), not against history")
            ab_screen(run, lambda: stack.enter_context(pool_factory(None, args.log)),
                      lambda: stack.enter_context(pool_factory(base_tree(), args.log)),
                      args.ab_each, out=out)
        if counted:
            add_series(run, counted())
        _print_screen(run, out)
        recount_run(run, suite, count_pool, out=out)
        if run.chosen:
            out(f"confirming {len(run.chosen)} suspects A/B against {base[:10]} (ABBA, "
                f"{args.ab_each or rules.AB_EACH} processes a side for compiles, "
                f"{args.ab_each or rules.CHEAP_AB_EACH} for micro-benchmarks)")

        def base_pool():
            return stack.enter_context(pool_factory(base_tree(), args.log))

        confirm_run(run, pool, base_pool, args.ab_each, out=out)
    for series, why in run.unconfirmed.items():
        which = f"all {len(run.chosen)} suspects" if series == "*" else f"suspect {series}"
        out(f"WARNING: {which} left unconfirmed: {why}")
    out(rules.summary(run.rows, len(run.chosen) + len(run.exact)
                      + len(rules.count_suspects(run.rows)), len(run.regressed),
                      run.canary, (load_start[0], os.getloadavg()[0])))
    out(f"gate time {time.monotonic() - started:.0f} s")
    return 1 if run.regressed else 0


def stale_history_note(base: str, suite: str) -> str:
    return (f"note: the library or the zoo's models changed since {base[:10]}, the commit of "
            "the newest history run, so the screen compares with how that commit measured "
            "(a slowdown smaller than the speedups since can pass it). After merging, record "
            f"quiet runs at the new commit: torch-trt-ref perf run --suite {suite} --record, "
            "5 times (docs/regressions.md, History)")


def _print_screen(run, out) -> None:
    if run.disturbed:
        out(f"disturbed machine: the cold canary moved x{run.disturbed:.2f} (a neighbour "
            "contending for memory slows compiles more than loops); suspects are confirmed "
            "A/B as always")
    if run.drift:
        out(f"machine drift: the canary and most time series moved x{run.drift:.2f}; time "
            "series are screened relative to the canary")
    if run.families:
        out(f"converter families screened relative to their median move, x{run.families:.2f} "
            "(not the history's machine: code moves unlike the canary)")
    for row in run.exact:
        out(rules.exact_line(row))
    for row in run.chosen:
        out(f"suspect {row.name}: x{row.ratio:.3f} vs history median, {row.z:.1f} "
            f"spreads ({row.spread.source} spread {row.spread.value:.3f})")
    _print_counts(run, out)
    moved = sorted((r for r in run.rows if r.spread and r.verdict != "suspect"
                    and r.type != "work"), key=lambda r: -r.z)[:3]
    cleared = {c.name: c for c in run.ab_screen}  # on a foreign machine: what A/B said
    if moved:  # none when only the count tier ran
        out("largest moves not suspect: " + ", ".join(
            f"{r.name} x{r.ratio:.2f} ({r.z:.1f} spreads"
            + (f"; A/B screen x{cleared[r.name].ratio:.2f}: not slower than the base)"
               if r.name in cleared else ")") for r in moved))
    unstable = [r.name for r in run.rows if r.verdict == "unstable"]
    if unstable:
        out(f"unstable (spread > {noise.UNSTABLE}, shown, not gated): {', '.join(unstable)}")


def _print_counts(run, out) -> None:
    """One line on the count tier: how many series, how many over threshold, the largest
    move (a count's spread is ~0, so moves are shown as ratios, not spreads)."""
    rows = [r for r in run.rows if r.type == "work"]
    if not rows:
        return
    new = sum(r.verdict == "new" for r in rows)
    judged = sorted((r for r in rows if r.ratio), key=lambda r: -abs(math.log(r.ratio)))
    largest = (f"; largest move {judged[0].name} x{judged[0].ratio:.4f}" if judged else "")
    out(f"count tier: {len(rows)} series, {len(rules.count_suspects(rows))} over their "
        f"threshold (x{1 + rules.MIN_EFFECT['work']:.2f} or 4 spreads), "
        f"{sum(r.verdict == 'improved' for r in rows)} improved, {new} new{largest}")


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--suite", choices=sorted(suites.SUITES), default="quick",
                   help="what to measure (default quick: the CI suite)")
    p.add_argument("--processes", type=number(int), default=None,
                   help="rounds of new measuring servers, a fresh process per group in "
                        "each (a compile group gets the suite's compile_children per round; "
                        "default: the suite's rounds)")
    p.add_argument("--history", type=Path, default=store.HISTORY_DIR,
                   help="run history directory (default perf-data/history)")
    p.add_argument("--noise", type=Path, default=noise.NOISE_FILE,
                   help="calibration file (default perf-data/noise.json)")
    p.add_argument("--max-wait", type=number(float, low_included=True), default=MAX_WAIT,
                   help=f"seconds to wait for a quiet machine (default {MAX_WAIT:.0f})")
    p.add_argument("--load-limit", type=number(float), default=None,
                   help="1-minute load average above which a run waits, then is marked "
                        f"loaded (default {LOAD_LIMIT_PER_CORE:g} x cores)")
    p.add_argument("--tiers", type=_tiers, default=TIERS,
                   help="what to measure, comma-separated: time (CPU seconds, RSS, latency, "
                        "work counters), counts (the count tier: interpreted work counted, "
                        "docs/regressions.md); default both")
    p.add_argument("--log", type=Path, default=None,
                   help="append the measuring processes' stderr to this file")


def _tiers(text: str) -> tuple[str, ...]:
    tiers = tuple(t.strip() for t in text.split(",") if t.strip())
    if not tiers or set(tiers) - set(TIERS):
        raise argparse.ArgumentTypeError(f"--tiers {text!r}: give one or more of "
                                         f"{', '.join(TIERS)}, comma-separated")
    return tiers


def add_subcommands(subparsers) -> None:
    perf = subparsers.add_parser("perf", help="performance runs, history and the regression "
                                              "gate (docs/regressions.md)")
    sub = perf.add_subparsers(dest="perf_command", required=True, metavar="PERF_COMMAND")
    r = sub.add_parser("run", help="measure a suite in fresh processes")
    _common(r)
    r.add_argument("--record", action="store_true", help="write the run to the history")
    r.add_argument("--json", default=None, help="also write the series here")
    r.set_defaults(func=run_command)
    c = sub.add_parser("calibrate", help="record --runs quiet reruns at this commit and "
                                         "write each series' spread to perf-data/noise.json")
    _common(c)
    c.add_argument("--runs", type=number(int, low=noise.MIN_CALIBRATION_RUNS, low_included=True),
                   default=noise.MIN_CALIBRATION_RUNS,
                   help="quiet reruns to record (default and minimum "
                        f"{noise.MIN_CALIBRATION_RUNS})")
    c.add_argument("--from-history", metavar="COMMIT", default=None,
                   help="measure nothing: recompute perf-data/noise.json from the runs recorded "
                        "at COMMIT (e.g. after the run statistic changed)")
    c.set_defaults(func=calibrate_command)
    g = sub.add_parser("gate", help="screen the working tree against history; confirm "
                                    "suspects A/B against --base; exit 1 on a regression")
    _common(g)
    g.add_argument("--base", default=None, help="commit to confirm suspects against "
                                                "(default: that of the newest history run)")
    g.add_argument("--max-suspects", type=number(int, low_included=True),
                   default=rules.MAX_SUSPECTS,
                   help="suspects of the history screen confirmed A/B at most, furthest "
                        f"above their history first (default {rules.MAX_SUSPECTS}); on a "
                        "machine that is not the history's every suspect of the A/B screen "
                        "is confirmed besides")
    g.add_argument("--ab-each", type=number(int), default=None,
                   help=f"processes per side in a confirmation (default {rules.AB_EACH} for "
                        f"compile groups, {rules.CHEAP_AB_EACH} for micro-benchmarks)")
    g.set_defaults(func=gate_command)
    add_history_subcommand(sub)


def main(argv: list[str] | None = None) -> int:
    from torch_trt_ref.cli import run_reporting_errors

    parser = argparse.ArgumentParser(prog="torch-trt-ref")
    add_subcommands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return run_reporting_errors(args.func, args, False)


if __name__ == "__main__":
    sys.exit(main())
