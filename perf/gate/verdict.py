"""One run of the regression gate, as ``perf gate`` and perf/gate/sensitivity.py both use it:
measure the suite on the working tree, screen every series against history, then confirm
the suspects A/B against the base (perf/gate/confirm.py). Printing and exit codes stay in
perf/cli.py; test-only slowdowns (perf/gate/inject.py) come in per group."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from . import rules, store
from .confirm import BaseCannotMeasure, confirm_group
from .runner import grouped, run_suite
from .suites import Suite


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

    @property
    def exact(self) -> list[rules.Screened]:
        return [r for r in self.rows if r.verdict == "REGRESSED"]

    @property
    def confirmed(self) -> list[rules.Confirmation]:
        return [c for c in self.confirmations if c.regressed]

    @property
    def regressed(self) -> list[str]:
        """Every series this run calls REGRESSED: exact ones, then confirmed ones."""
        return [r.name for r in self.exact] + [c.name for c in self.confirmed]

    @property
    def canary(self) -> float | None:
        return next((r.ratio for r in self.rows if r.name == rules.CANARY_SERIES), None)


def screen_run(suite: Suite, open_pool, runs: list[store.Run], calibration: dict | None,
               annotations: list[dict], processes: int | None = None,
               inject: dict[str, dict] | None = None,
               max_suspects: int = rules.MAX_SUSPECTS) -> GateRun:
    """Measure ``suite`` on servers from ``open_pool()`` (``inject``: a test-only slowdown
    per group) and screen it against ``runs``, relative to the canary when the machine
    drifted; the suspects to confirm are at most ``max_suspects``, furthest first."""
    current = run_suite(suite, open_pool, processes, inject=inject)
    rows = rules.screen(current, runs, calibration, annotations)
    drift = rules.machine_drift(rows)
    if drift:
        rows = rules.screen(current, runs, calibration, annotations, drift)
    return GateRun(rows, drift, rules.disturbance(current, runs, annotations),
                   rules.suspects(rows, max_suspects), current=current)


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
