"""The gate on a machine that is not the history's (issue 38): compile series screened A/B
against the base, each compile measured once (by that screen), the converter families
relative to their own median move, the count tier beside the A/B screen; with fake pools
(tests/perf_gate_fakes.py), no timings."""

from __future__ import annotations

import pytest
from perf_gate_fakes import (
    COUNTED,
    QUIET,
    QUIET_TREE,
    FakePool,
    base_values,
    history_runs,
    one_model_suite,
    run_gate,
    series_of,
)

from perf.gate import rules


@pytest.fixture(autouse=True)
def _one_model_suite(monkeypatch):
    one_model_suite(monkeypatch)


def test_on_another_machine_compile_series_are_screened_ab(tmp_path):
    """History recorded on a machine 3.5x faster for the canary but 3x for the compile (code
    does not scale with a canary). A compile 20% slower than the base screens at x1.03
    relative to the canary, under any threshold; the gate sees the machine is not the
    history's and screens the compile A/B against the base instead: REGRESSED. The
    unchanged tree passes, and on the history's machine the history screen is used."""
    elsewhere = {"compile/m/cpu/total": 1 / 3.0, "canary/cpu": 1 / 3.5}
    slower = {"compile:m": {**QUIET_TREE["compile:m"], "compile/m/cpu/total": ("cpu", 1.2)},
              "canary": QUIET_TREE["canary"]}
    code, out = run_gate(tmp_path / "slower", slower, history_factor=elsewhere)
    assert code == 1, out
    assert any(line.startswith("not the history's machine: the canary moved x3.5")
               for line in out)
    assert any(line.startswith("A/B screen: suspect compile/m/cpu/total: x1.2") for line in out)
    assert any(line.startswith("REGRESSED compile/m/cpu/total: x1.2") for line in out)
    code, out = run_gate(tmp_path / "same", QUIET_TREE, history_factor=elsewhere)
    assert code == 0 and any(line.startswith("not the history's machine") for line in out)
    assert not any(line.startswith(("A/B screen", "REGRESSED", "noise")) for line in out)
    # a move against the foreign history that the A/B screen cleared says so
    moved = next(line for line in out if line.startswith("largest moves not suspect"))
    assert "compile/m/cpu/total x" in moved and "A/B screen x1.0" in moved, moved
    code, out = run_gate(tmp_path / "home", QUIET_TREE)  # the history's machine
    assert code == 0 and not any(line.startswith("not the history's") for line in out)
    assert not any(line.startswith("A/B screen") for line in out)


def test_the_ab_screen_s_suspects_leave_the_history_screen_its_budget(tmp_path):
    """On a machine that is not the history's, the A/B screen's suspects are all confirmed
    and do not use up the history screen's: with --max-suspects 1 a slower compile (the A/B
    screen's) and a peak RSS 50% over its history (the history screen's) are both REGRESSED
    (before, 8 slowed compile series hid a family 20% slower in 2 of 5 trials, issue 38)."""
    elsewhere = {"compile/m/cpu/total": 1 / 3.0, "canary/cpu": 1 / 3.5}
    rss = {"compile/m/rss/peak": ("rss", 100.0)}
    worse = {"compile:m": {**QUIET_TREE["compile:m"], "compile/m/cpu/total": ("cpu", 1.2),
                           "compile/m/rss/peak": ("rss", 150.0)},
             "canary": QUIET_TREE["canary"]}
    code, out = run_gate(tmp_path, worse, history_factor=elsewhere, extra=rss,
                      args=["--max-suspects", "1"])
    assert code == 1, out
    regressed = sorted(line.split(":")[0] for line in out if line.startswith("REGRESSED"))
    assert regressed == ["REGRESSED compile/m/cpu/total", "REGRESSED compile/m/rss/peak"]


def test_foreign_machine_is_the_canary_beyond_the_minimum_effect():
    rows = [rules.Screened("canary/cpu", "cpu", "s", v, 1.0) for v in (1.05, 1.2, 0.8)]
    assert [rules.foreign_machine([r]) for r in rows] == [None, 1.2, 0.8]


ELSEWHERE = {"compile/m/cpu/total": 1 / 3.0, "canary/cpu": 1 / 3.5}


def test_a_foreign_machine_measures_its_compiles_once(tmp_path):
    """On a machine that is not the history's the screen's rounds measure no compile: the
    A/B screen's 6 working-tree processes are the measurement (Note [A foreign machine's
    compiles are measured once]), and the exact counts and peak RSS read from them are
    still judged against history."""
    counted = {"compile:m": {**QUIET_TREE["compile:m"], "compile/m/count/layers": ("count", 11.0)},
               "canary": QUIET_TREE["canary"]}
    code, out = run_gate(tmp_path, counted, history_factor=ELSEWHERE)
    assert code == 1 and any(line.startswith("REGRESSED compile/m/count/layers") for line in out)
    # history's machine: 2 rounds of the compile, none of them A/B
    pools: dict = {}
    run_gate(tmp_path / "home", QUIET_TREE, pools=pools)
    assert pools[None].calls.count("compile:m") == 2 and pools["base"].calls == []
    pools = {}
    run_gate(tmp_path / "foreign", QUIET_TREE, history_factor=ELSEWHERE, pools=pools)
    assert pools[None].calls.count("compile:m") == rules.AB_EACH
    assert pools["base"].calls.count("compile:m") == rules.AB_EACH
    assert pools[None].calls.count("canary") == 2


def test_a_foreign_machine_without_the_base_screens_its_compiles_against_history(tmp_path):
    """The base cannot measure the compile (or is not in the clone): the compile groups are
    measured in rounds after all and screened against history, so a count still fails."""
    counted = {"compile:m": {**QUIET_TREE["compile:m"], "compile/m/count/layers": ("count", 11.0)},
               "canary": QUIET_TREE["canary"]}
    pools: dict = {}
    code, out = run_gate(tmp_path, counted, history_factor=ELSEWHERE, base_fails="too old",
                      pools=pools)
    assert code == 1 and any(line.startswith("REGRESSED compile/m/count/layers") for line in out)
    assert any("ab-screen compile:m left unconfirmed" in line for line in out)
    # one A process before the base failed, then the 2 rounds
    assert pools[None].calls.count("compile:m") == 1 + 2


def test_the_count_tier_runs_beside_the_ab_screen(tmp_path):
    """The count tier's server counts while the A/B screen measures (a count does not
    depend on the load): its first count waits for the A/B screen's base side to start,
    which would never happen if they ran one after the other."""
    import threading

    ab_started = threading.Event()

    class Base(FakePool):
        def measure(self, group, inject=None, cases=None):
            ab_started.set()
            return super().measure(group, inject, cases)

    class Counts(FakePool):
        def measure(self, group, inject=None, cases=None):
            self.waited = ab_started.wait(timeout=30)
            return super().measure(group, inject, cases)

    counts = Counts(COUNTED)
    code, out = run_gate(tmp_path, QUIET_TREE, history_factor=ELSEWHERE,
                      pools={"base": Base(base_values())}, count_factory=lambda *a: counts)
    assert code == 0 and counts.waited
    assert any(line.startswith("count tier: 1 series, 0 over") for line in out)


def test_on_a_foreign_machine_families_are_screened_relative_to_their_own_move(tmp_path):
    """History from a machine where the canary ran 3.8x and the families ~4.9x faster: with
    the canary's drift every family is a suspect (all noise); relative to the families'
    median move only the one 20% slower than its peers is. At home (canary unmoved) the
    canary's rule stands."""
    from perf.gate.verdict import _screen

    names = [f"family/f{i}/cpu" for i in range(10)]
    runs = history_runs(tmp_path, {n: ("cpu", QUIET) for n in [*names, "canary/cpu"]})
    moves = [4.75, 4.8, 4.85, 4.9, 4.95, 4.85, 4.8, 4.9, 4.87, 4.87 * 1.2]
    current = series_of({"canary/cpu": ("cpu", 3.8),
                        **{n: ("cpu", m) for n, m in zip(names, moves)}})
    rows, drift, families = _screen(current, (runs, None, []))
    assert drift == pytest.approx(3.8, rel=0.02) and families == pytest.approx(4.87, rel=0.01)
    assert [r.name for r in rows if r.verdict == "suspect"] == ["family/f9/cpu"]
    canary_only = rules.screen(current, runs, drift=drift)
    assert sum(r.verdict == "suspect" for r in canary_only) == 10
    home = series_of({"canary/cpu": ("cpu", 1.0), **{n: ("cpu", 1.0) for n in names}})
    assert _screen(home, (runs, None, []))[2] is None
    few = series_of({"canary/cpu": ("cpu", 3.8), **{n: ("cpu", 4.8) for n in names[:7]}})
    assert _screen(few, (runs, None, []))[2] is None  # under rules.MIN_FAMILIES
