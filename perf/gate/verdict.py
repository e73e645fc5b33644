"""One run of the regression gate, as ``perf gate`` and perf/gate/sensitivity.py both use it:
measure the suite on the working tree (time tier and count tier), screen every series
against history, re-count the count tier's suspects, on a machine that is not the
history's screen the compile series A/B against the base instead, then confirm the time
suspects A/B against the base (perf/gate/confirm.py). Printing and exit codes stay in
perf/cli.py; test-only slowdowns (perf/gate/inject.py) come in per group."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Callable

from . import rules, store
from .confirm import BaseCannotMeasure, confirm_group
from .runner import count_suite, grouped, run_suite
from .suites import Suite, group_of, is_compile, is_compile_group

TIERS = ("time", "counts")


@dataclass
class GateRun:
    """What one gate run found."""

    rows: list[rules.Screened]
    drift: float | None = None
    disturbed: float | None = None  # the cold canary's ratio when the machine was disturbed
    chosen: list[rules.Screened] = field(default_factory=list)  # suspects confirmed A/B
    confirmations: list[rules.Confirmation] = field(default_factory=list)
    # why suspects could not be confirmed: {series, or "*" for every suspect: why}
    unconfirmed: dict[str, str] = field(default_factory=dict)
    current: dict[str, store.Series] = field(default_factory=dict)  # what was measured
    recounts: dict[str, float] = field(default_factory=dict)  # count suspect: its re-count
    # the canary's ratio when this machine is not the history's: compile series screened A/B
    foreign: float | None = None
    families: float | None = None  # then the families' median move (rules.family_drift)
    ab_screen: list[rules.Confirmation] = field(default_factory=list)  # that screen's A/Bs
    # compile groups the screen left to the A/B screen on a foreign machine (Note [A foreign
    # machine's compiles are measured once]), and what screening later series needs
    deferred: list[str] = field(default_factory=list)
    history: tuple = ((), None, ())  # (runs, calibration, annotations)
    max_suspects: int = rules.MAX_SUSPECTS
    measure_rounds: Callable[[list[str]], dict[str, store.Series]] | None = None

    @property
    def counted(self) -> list[rules.Screened]:
        """The count tier's suspects whose re-count agreed: REGRESSED without a timing A/B."""
        return [r for r in rules.count_suspects(self.rows)
                if r.name in self.recounts and rules.recounted(r, self.recounts[r.name])]

    @property
    def exact(self) -> list[rules.Screened]:
        return [r for r in self.rows if r.verdict == "REGRESSED"]

    @property
    def confirmed(self) -> list[rules.Confirmation]:
        return [c for c in self.confirmations if c.regressed]

    @property
    def regressed(self) -> list[str]:
        """Every series this run calls REGRESSED: exact ones, counted ones (re-counted),
        then confirmed ones."""
        return ([r.name for r in self.exact] + [r.name for r in self.counted]
                + [c.name for c in self.confirmed])

    @property
    def canary(self) -> float | None:
        return next((r.ratio for r in self.rows if r.name == rules.CANARY_SERIES), None)


def screen_run(suite: Suite, open_pool, runs: list[store.Run], calibration: dict | None,
               annotations: list[dict], processes: int | None = None,
               inject: dict[str, dict] | None = None,
               max_suspects: int = rules.MAX_SUSPECTS, open_count_pool=None,
               tiers: tuple[str, ...] = TIERS) -> GateRun:
    """Measure ``suite`` on servers from ``open_pool()`` (``inject``: a test-only slowdown
    per group), and its count tier on a server from ``open_count_pool()`` (none: no count
    tier; ``start_counts`` runs it beside other work), and screen it against ``runs``,
    relative to the canary when the machine drifted; the suspects to confirm are at most
    ``max_suspects``, furthest first.

    The converter families and the canaries are measured first. On a machine that is not
    the history's (``rules.foreign_machine``: the canary) the compile groups are not measured
    in rounds at all: ``run.foreign`` is set and ``ab_screen`` measures them, A/B against the
    base, its working-tree side standing for the screen's samples (Note [A foreign machine's
    compiles are measured once]); elsewhere they are measured in rounds as before."""
    current: dict[str, store.Series] = {}
    deferred: list[str] = []
    if "time" in tiers:
        current.update(run_suite(suite, open_pool, processes, inject=inject,
                                 keep=lambda group: not is_compile_group(group)))
        if rules.foreign_machine(rules.screen(current, runs, calibration, annotations)):
            deferred = list(suite.built)
        else:
            current.update(run_suite(suite, open_pool, processes, inject=inject,
                                     keep=is_compile_group))
    if "counts" in tiers and open_count_pool is not None:
        current.update(count_suite(suite, open_count_pool, inject=inject))
    rows, drift, families = _screen(current, (runs, calibration, annotations))
    return GateRun(rows, drift, rules.disturbance(current, runs, annotations),
                   rules.suspects(rows, max_suspects), current=current,
                   foreign=rules.foreign_machine(rows), families=families, deferred=deferred,
                   history=(runs, calibration, annotations), max_suspects=max_suspects,
                   measure_rounds=lambda groups: run_suite(suite, open_pool, processes,
                                                           groups=groups, inject=inject))


def _screen(current: dict[str, store.Series], history: tuple
            ) -> tuple[list[rules.Screened], float | None, float | None]:
    """(rows, drift, the families' drift): ``current`` screened against the history,
    relative to the canary when the machine drifted, and on a machine that is not the
    history's the converter families relative to their own median move
    (``rules.family_drift``)."""
    rows = rules.screen(current, *history)
    drift = rules.machine_drift(rows)
    families = rules.family_drift(rows) if rules.foreign_machine(rows) else None
    if drift or families:
        rows = rules.screen(current, *history, drift or 1.0, families)
    return rows, drift, families


# Note [A foreign machine's compiles are measured once]: on a machine that is not the
# history's, the screen's rounds of compiles were only read for peak RSS and the exact counts
# (their times were screened A/B against the base anyway), and the A/B screen then measured
# the same groups again on the working tree's side: of a quiet foreign gate's ~265 s, ~50 s
# went to compile servers and compiles whose times nobody judged (issue 38: the gate must fit
# 15 minutes on a machine 4x slower). So the families and the canaries are measured first,
# and when the canary says the machine is foreign, each compile group's 6 working-tree
# processes of the A/B screen are its measurement: peak RSS is screened against history on
# their median, counts on the first, times A/B. A group the base cannot measure (or a base
# not in the clone) is measured in rounds after all and screened against history, as before.


def add_series(run: GateRun, series: dict[str, store.Series]) -> GateRun:
    """Screen ``series`` measured after the screen (the count tier run beside the A/B
    screen, a deferred compile group) against the history, with the run's drift, and add
    them to ``run``; rows already judged keep their verdicts."""
    run.current.update(series)
    run.rows += rules.screen(series, *run.history, run.drift or 1.0, run.families)
    return run


def start_counts(suite: Suite, open_count_pool, inject: dict[str, dict] | None = None
                 ) -> Callable[[], dict[str, store.Series]]:
    """The count tier of ``suite``, measured in a thread beside whatever the caller does
    next (a count does not depend on what else runs: docs/regressions.md, "The count
    tier"); returns the function that waits for its series (or raises its error)."""
    done: dict = {}

    def work() -> None:
        try:
            done["series"] = count_suite(suite, open_count_pool, inject=inject)
        except BaseException as err:  # noqa: BLE001  (raised by the waiter)
            done["error"] = err

    thread = threading.Thread(target=work, name="count tier", daemon=True)
    thread.start()

    def wait() -> dict[str, store.Series]:
        thread.join()
        if "error" in done:
            raise done["error"]
        return done["series"]

    return wait


def recount_run(run: GateRun, suite: Suite, open_count_pool,
                inject: dict[str, dict] | None = None,
                out: Callable[[str], None] = lambda line: None) -> GateRun:
    """Re-count the groups of the count tier's suspects on a new count server (a flake of
    the measurement would not repeat); ``out`` gets one line per suspect."""
    found = rules.count_suspects(run.rows)
    if not found:
        return run
    groups = sorted({group_of(r.name) for r in found})
    again = count_suite(suite, open_count_pool, groups, inject=inject)
    for row in found:
        if row.name in again:
            run.recounts[row.name] = again[row.name].statistic()
    counted = {r.name for r in run.counted}
    for row in found:
        value = run.recounts.get(row.name)
        out(rules.count_line(row, value, row.name in counted))
    return run


def ab_screen(run: GateRun, open_a: Callable[[], object], open_b: Callable[[], object],
              ab_each: int | None = None, inject: dict[str, dict] | None = None,
              out: Callable[[str], None] = lambda line: None,
              max_suspects: int | None = None) -> GateRun:
    """On a machine that is not the history's, a history recorded elsewhere cannot screen
    time (issue 38: the canary moved x3-4, code moved x3-9, and a 30% slower compile passed):
    every gated time series of every compile group is measured A/B against the base on
    servers of its own (``open_a()``, ``open_b()``, opened here), and a series that passes
    the confirmation rule there becomes the suspect (its history verdict is replaced); the
    confirm step then re-measures it on new servers. The compile groups the screen left to
    this step (``run.deferred``) are measured here only: side A's results are their
    measurement (Note [A foreign machine's compiles are measured once]). Other groups
    (converter families, whose counts the count tier judges) and peak RSS keep the history
    screen."""
    limit = run.max_suspects if max_suspects is None else max_suspects
    groups = sorted({group_of(r.name) for r in run.rows if is_compile(r.name)
                     and r.type in rules.TIME_TYPES} | set(run.deferred))
    if not groups:
        return run
    try:
        pool_b = open_b()
    except ValueError as err:  # the base is not in this clone: keep the history screen
        run.unconfirmed["ab-screen"] = str(err)
        _measure_in_rounds(run, run.deferred)
        run.chosen = rules.suspects(run.rows, limit)
        return run
    pool_a = open_a()
    alone = []  # deferred groups the base could not measure
    for group in groups:
        deferred = group in run.deferred
        names = None if deferred else [
            r.name for r in run.rows if group_of(r.name) == group and
            r.type in rules.TIME_TYPES and r.verdict in ("ok", "suspect")]
        side_a: list[dict] = []
        try:
            found = confirm_group(group, names, pool_a, pool_b,
                                  ab_each or rules.ab_each(group), (inject or {}).get(group),
                                  side_a)
        except BaseCannotMeasure as err:
            run.unconfirmed["ab-screen " + group] = str(err)
            if deferred:
                alone.append(group)
            continue
        if deferred:
            add_series(run, _as_series(side_a))
        by_name = {r.name: r for r in run.rows}
        for c in found:
            if by_name[c.name].verdict not in ("ok", "suspect"):  # new, unstable: as the
                continue  # history says
            run.ab_screen.append(c)
            if c.regressed:
                out("A/B screen: suspect " + c.line().removeprefix("REGRESSED "))
    _measure_in_rounds(run, alone)
    judged = {c.name: c.regressed for c in run.ab_screen}
    flagged = []
    for row in run.rows:
        if row.name in judged:
            row.verdict = "suspect" if judged[row.name] else "ok"
            if judged[row.name]:
                flagged.append(row)
    # Every suspect of the A/B screen is confirmed, and up to max_suspects of the history
    # screen's others beside them: the A/B screen's suspects must not use up the history
    # screen's budget (with 8 slowed compile series chosen first, a family 20% slower that
    # screened at 28 spreads was never confirmed in 2 of 5 trials, issue 38).
    others = [r for r in run.rows if r not in flagged]
    run.chosen = flagged + rules.suspects(others, limit)
    return run


def _as_series(results: list[dict]) -> dict[str, store.Series]:
    """Series from the results of one group's processes (one server: one round)."""
    series: dict[str, store.Series] = {}
    for result in results:
        for name, v in result.items():
            series.setdefault(name, store.Series(name, v["unit"], v["type"])).samples.append(
                v["value"])
    return series


def _measure_in_rounds(run: GateRun, groups: list[str]) -> None:
    """Deferred compile groups the A/B screen could not measure, measured in rounds and
    screened against history after all, as on the history's machine: the run's drift is
    taken again over every series (the A/B screen re-marks the series it judged)."""
    if not groups:
        return
    run.current.update(run.measure_rounds(groups))
    run.rows, run.drift, run.families = _screen(run.current, run.history)


def confirm_run(run: GateRun, pool, base_pool: Callable[[], object],
                ab_each: int | None = None, inject: dict[str, dict] | None = None,
                out: Callable[[str], None] = lambda line: None) -> GateRun:
    """Confirm ``run``'s chosen suspects against the pool ``base_pool()`` opens on first
    use; ``out`` gets each confirmation's line. A group the base cannot measure leaves
    its suspects unconfirmed (``run.unconfirmed``) and the other groups go on; a failure
    on the working tree's side is raised."""
    if not run.chosen:
        return run
    try:
        base = base_pool()
    except ValueError as err:  # the base is not in this clone
        run.unconfirmed["*"] = str(err)
        return run
    for group, names in grouped([r.name for r in run.chosen]).items():
        each = ab_each or rules.ab_each(group)
        try:
            found = confirm_group(group, names, pool, base, each, (inject or {}).get(group))
        except BaseCannotMeasure as err:
            run.unconfirmed.update(dict.fromkeys(names, str(err)))
            continue
        for c in found:
            out(c.line())
            run.confirmations.append(c)
    return run
