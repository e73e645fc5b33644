"""The regression gate's decisions on synthetic samples (no timings): screening against a
history, exact counts, machine drift, the A/B confirmation rule, and ``perf gate``'s exit
codes with a fake measuring pool in place of fresh processes."""

from __future__ import annotations

import argparse
import json
import math
import re
import subprocess
from itertools import combinations
from pathlib import Path

import pytest
from perf_gate_fakes import (
    COMMIT,
    QUIET,
    QUIET_TREE,
    FakePool,
    fake_counts,
    history_runs,
    one_model_suite,
    run_gate,
    series_of,
)

from perf import cli
from perf.cli import add_subcommands, gate_command
from perf.gate import noise, rules, store, suites
from perf.gate.confirm import resolve_commit
from perf.gate.worker import ROOT, MeasureError


def test_screen_verdicts(tmp_path):
    runs = history_runs(tmp_path, {"c/cpu": ("cpu", QUIET), "c/small": ("cpu", QUIET),
                            "c/noisy": ("cpu", [1.0, 1.3, 0.8, 1.2, 0.7, 1.0, 1.4, 0.9]),
                            "c/count": ("count", [10.0]), "c/fewer": ("count", [10.0]),
                            "c/wall": ("wall", QUIET), "c/rss": ("rss", QUIET)})
    rows = {r.name: r for r in rules.screen(series_of({
        "c/cpu": ("cpu", 1.5), "c/small": ("cpu", 1.08), "c/noisy": ("cpu", 3.0),
        "c/count": ("count", 11.0), "c/fewer": ("count", 9.0), "c/wall": ("wall", 9.0),
        "c/rss": ("rss", 1.08), "c/new": ("cpu", 1.0)}), runs)}
    assert rows["c/cpu"].verdict == "suspect"  # 40 spreads and +50%
    assert rows["c/small"].verdict == "ok"  # > 4 spreads but under the 10% minimum effect
    assert rows["c/noisy"].verdict == "unstable"  # spread > 0.15: shown, never gating
    assert rows["c/count"].verdict == "REGRESSED"  # exact: any increase
    assert rows["c/fewer"].verdict == "improved"
    assert rows["c/wall"].verdict == "shown"  # wall time is never gated
    assert rows["c/rss"].verdict == "suspect"  # memory's minimum effect is 5%
    assert rows["c/new"].verdict == "new"
    assert rows["c/cpu"].spread.source == "history"


def test_spread_must_be_exceeded_four_times(tmp_path):
    """+15% is over the minimum effect but within 4 spreads of a series whose spread is
    0.05 (from the calibration, history being too short): not a suspect."""
    runs = history_runs(tmp_path, {"c/cpu": ("cpu", [1.0])}, n=3)
    calibration = {"series": {"c/cpu": {"spread": 0.05, "n": 5}}}
    row, = rules.screen(series_of({"c/cpu": ("cpu", 1.15)}), runs, calibration)
    assert row.spread.source == "calibration" and row.verdict == "ok"
    row, = rules.screen(series_of({"c/cpu": ("cpu", 1.25)}), runs, calibration)
    assert row.verdict == "suspect"


def test_machine_drift_screens_relative_to_the_canary(tmp_path):
    names = ["canary/cpu", "a/cpu", "b/cpu", "c/cpu", "d/latency"]
    runs = history_runs(tmp_path, {n: ("latency" if "latency" in n else "cpu", QUIET)
                                   for n in names})
    slower = {n: ("latency" if "latency" in n else "cpu", 1.3) for n in names}
    slower["d/latency"] = ("latency", 1.3 * 1.5)  # one series moved more than the machine
    rows = rules.screen(series_of(slower), runs)
    drift = rules.machine_drift(rows)
    assert drift == pytest.approx(1.3, rel=0.02)
    rows = {r.name: r for r in rules.screen(series_of(slower), runs, drift=drift)}
    assert [n for n, r in rows.items() if r.verdict == "suspect"] == ["d/latency"]
    assert rows["canary/cpu"].verdict == "shown"
    only_canary = {**{n: (t, 1.0) for n, (t, _) in slower.items()}, "canary/cpu": ("cpu", 1.3)}
    assert rules.machine_drift(rules.screen(series_of(only_canary), runs)) is None


def test_a_disturbed_machine_is_told_by_the_cold_canary(tmp_path):
    """The cold canary 12% above its history median (spread ~0.015) marks the run
    disturbed; 3% above is within its noise; the loop canary alone says nothing; and with
    fewer than noise.MIN_HISTORY quiet points nothing is judged."""
    runs = history_runs(tmp_path, {suites.COLD_CANARY: ("cpu", QUIET),
                                   "canary/cpu": ("cpu", QUIET)})
    rows = {r.name: r for r in rules.screen(series_of({suites.COLD_CANARY: ("cpu", 1.12)}), runs)}
    assert rows[suites.COLD_CANARY].verdict == "shown"  # a canary is never gated
    assert rules.disturbance(series_of({suites.COLD_CANARY: ("cpu", 1.12)}), runs) == \
        pytest.approx(1.12, rel=0.02)
    assert rules.disturbance(series_of({suites.COLD_CANARY: ("cpu", 1.03)}), runs) is None
    assert rules.disturbance(series_of({"canary/cpu": ("cpu", 1.5)}), runs) is None
    few = history_runs(tmp_path / "few", {suites.COLD_CANARY: ("cpu", QUIET)},
                n=noise.MIN_HISTORY - 1)
    assert rules.disturbance(series_of({suites.COLD_CANARY: ("cpu", 2.0)}), few) is None


def test_a_run_on_a_disturbed_machine_is_recorded_as_loaded(tmp_path):
    """``perf run --record`` marks a run whose cold canary moved: kept and shown, but the
    noise model, the baselines and the change points leave it out."""
    history_runs(tmp_path, {suites.COLD_CANARY: ("cpu", QUIET),
                            "compile/m/cpu/total": ("cpu", QUIET)})
    values = {"compile:m": {"compile/m/cpu/total": ("cpu", 1.3)},
              "canary": {suites.COLD_CANARY: ("cpu", 1.2), "canary/cpu": ("cpu", 1.0)}}
    assert _perf_run_record(tmp_path, values, processes=1) == 0
    *quiet, newest = store.load_runs(tmp_path)
    assert newest.loaded and newest.header["disturbed"]["cold_canary"] == pytest.approx(1.2,
                                                                                       rel=0.02)
    assert noise.baseline("compile/m/cpu/total", [*quiet, newest]) == pytest.approx(1.0)


def test_exact_mann_whitney_matches_counting():
    """The one-sided exact p-value of fully separated 6+6 samples is 1/C(12,6) = 1/924, and
    with one swapped pair 2/924 (counted here by enumeration, an oracle independent of
    scipy)."""
    a, b = [1.2 + 0.01 * i for i in range(6)], [1.0 + 0.01 * i for i in range(6)]
    assert rules.Confirmation("x", "cpu", a, b).pvalue == pytest.approx(1 / 924)
    a2, b2 = sorted(a)[1:] + [b[-1]], b[:-1] + [sorted(a)[0]]
    pooled = a2 + b2
    u = sum(x > y for x in a2 for y in b2)
    as_extreme = sum(sum(pooled[i] > pooled[j] for i in idx for j in set(range(12)) - set(idx))
                     >= u for idx in combinations(range(12), 6))
    assert rules.Confirmation("x", "cpu", a2, b2).pvalue == pytest.approx(as_extreme / 924)


@pytest.mark.parametrize("a,b,regressed", [
    ([1.20, 1.22, 1.21, 1.25, 1.19, 1.23], [1.0, 1.02, 0.99, 1.01, 1.03, 1.0], True),
    ([1.04, 1.05, 1.06, 1.05, 1.04, 1.06], [1.0, 1.01, 0.99, 1.0, 1.02, 1.01], False),  # < 10%
    ([1.3, 0.9, 1.25, 1.0, 1.2, 0.95], [1.0, 1.1, 0.98, 1.2, 1.05, 0.97], False),  # p >= 0.01
])
def test_confirmation_rule(a, b, regressed):
    c = rules.Confirmation("x/cpu", "cpu", a, b)
    assert c.regressed is regressed
    assert c.line().startswith("REGRESSED" if regressed else "noise (unconfirmed)")
    if not regressed:  # both sample sets are printed
        assert "A (working tree)" in c.line() and "B (base)" in c.line()


def test_abba_order():
    assert rules.abba(6) == list("ABBAABBAABBA")
    with pytest.raises(ValueError, match="even"):
        rules.abba(5)


@pytest.fixture(autouse=True)
def _one_model_suite(monkeypatch):
    one_model_suite(monkeypatch)


def test_gate_passes_a_quiet_tree(tmp_path):
    code, out = run_gate(tmp_path, {"compile:m": {"compile/m/cpu/total": ("cpu", 1.0),
                                               "compile/m/count/layers": ("count", 10.0)},
                                 "canary": {"canary/cpu": ("cpu", 1.0)}})
    assert code == 0
    summary = out[-2]
    assert summary.startswith("4 series screened, 0 suspects, 0 confirmed; canary x1.00; load ")
    assert summary.endswith("; 0 unstable")


def test_gate_fails_on_a_count(tmp_path):
    code, out = run_gate(tmp_path, {"compile:m": {"compile/m/cpu/total": ("cpu", 1.0),
                                               "compile/m/count/layers": ("count", 11.0)},
                                 "canary": {"canary/cpu": ("cpu", 1.0)}})
    assert code == 1
    assert any(line.startswith("REGRESSED compile/m/count/layers") for line in out)


@pytest.mark.parametrize("ops,expected", [(1020.0, 1), (1005.0, 0), (950.0, 0)])
def test_the_count_tier_regresses_without_a_timing_ab(tmp_path, ops, expected):
    """A counted series 2% over its history (counts repeat exactly: threshold x1.01) is
    REGRESSED once a re-count agrees, with no A/B; 0.5% is under the threshold; fewer ops
    is an improvement."""
    code, out = run_gate(tmp_path, QUIET_TREE,
                      counted={"compile:m": {"compile/m/ops/lowering": ("work", ops)}})
    assert code == expected
    lines = [line for line in out if line.startswith("REGRESSED compile/m/ops")]
    if expected:
        assert lines == [f"REGRESSED compile/m/ops/lowering: {ops:g} s (history 1000, "
                         f"x{ops / 1000:.4f}; re-counted {ops:g}; the count tier's threshold "
                         "x1.010)"]
        assert not any(line.startswith("confirming") for line in out)  # no timing A/B
        assert "1 suspects, 1 confirmed" in out[-2]
    else:
        assert not any(line.startswith("REGRESSED") for line in out)
    counts = next(line for line in out if line.startswith("count tier: "))
    assert counts.startswith(f"count tier: 1 series, {expected} over their threshold")
    assert (" 1 improved" in counts) == (ops < 1000)


def test_a_count_that_does_not_repeat_is_a_flake(tmp_path):
    """The re-count runs on a new count server; a count that does not repeat there is not
    REGRESSED."""
    first, again = ({"compile:m": {"compile/m/ops/lowering": ("work", v)}}
                    for v in (1100.0, 1000.0))
    opened: list = []

    def factory(tree, log, models):
        opened.append(FakePool(first if not opened else again))
        return opened[-1]

    history_values = {n: (t, [v]) for g in QUIET_TREE.values() for n, (t, v) in g.items()}
    history_values["compile/m/ops/lowering"] = ("work", [1000.0])
    history_runs(tmp_path / "history", history_values)
    parser = argparse.ArgumentParser()
    add_subcommands(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["perf", "gate", "--history", str(tmp_path / "history"),
                              "--noise", str(tmp_path / "none.json"), "--max-wait", "0",
                              "--load-limit", "1000"])
    out: list[str] = []
    code = gate_command(args, pool_factory=lambda tree, log: FakePool(QUIET_TREE),
                        out=out.append, count_factory=factory)
    assert code == 0 and len(opened) == 2
    assert any(line.startswith("count flake (not repeated) compile/m/ops/lowering: 1100 s "
                               "(history 1000, x1.1000; re-counted 1000") for line in out)


@pytest.mark.parametrize("base_factor,expected", [(1.0, 1), (1.4, 0)])
def test_gate_confirms_or_rejects_a_suspect(tmp_path, base_factor, expected):
    """The tree measures 1.4x its history. A base that measures 1.0 confirms it; a base
    that is now as slow (the machine, not the change) leaves it noise (unconfirmed)."""
    code, out = run_gate(tmp_path, {"compile:m": {"compile/m/cpu/total": ("cpu", 1.4),
                                               "compile/m/count/layers": ("count", 10.0)},
                                 "canary": {"canary/cpu": ("cpu", 1.0)}}, base_factor)
    assert code == expected
    verdicts = [line for line in out if line.startswith(("REGRESSED", "noise"))]
    assert len(verdicts) == 1 and verdicts[0].startswith(
        "REGRESSED compile/m/cpu/total" if expected else "noise (unconfirmed)")
    assert "1 suspects, " + str(expected) + " confirmed" in out[-2]


def test_a_suspect_the_base_cannot_measure_is_a_warning(tmp_path):
    """A base whose library cannot run the measurement (an older commit) leaves the suspect
    unconfirmed with a WARNING naming why, and the gate does not fail on it."""
    code, out = run_gate(tmp_path, {"compile:m": {"compile/m/cpu/total": ("cpu", 1.4),
                                               "compile/m/count/layers": ("count", 10.0)},
                                 "canary": {"canary/cpu": ("cpu", 1.0)}},
                      base_fails="the compile measuring server exited: ImportError: x")
    assert code == 0
    assert ("WARNING: suspect compile/m/cpu/total left unconfirmed: the base cannot measure "
            "compile:m: the compile measuring server exited: ImportError: x") in out
    assert not any(line.startswith(("REGRESSED", "noise")) for line in out)


def test_a_failure_on_the_working_trees_side_is_raised(tmp_path):
    """The working tree failing to measure during the A/B is an error, not a warning."""
    with pytest.raises(MeasureError, match="broken tree"):
        run_gate(tmp_path, {"compile:m": {"compile/m/cpu/total": ("cpu", 1.4),
                                       "compile/m/count/layers": ("count", 10.0)},
                         "canary": {"canary/cpu": ("cpu", 1.0)}}, current_fails="broken tree")


def test_a_history_older_than_the_library_is_pointed_out(tmp_path):
    """The newest history run measured other library code than HEAD's (here a commit git
    does not have): the gate says so and how to record new runs; with history at HEAD's
    commit it does not."""
    quiet = {"compile:m": {"compile/m/cpu/total": ("cpu", 1.0),
                           "compile/m/count/layers": ("count", 10.0)},
             "canary": {"canary/cpu": ("cpu", 1.0)}}
    _, out = run_gate(tmp_path / "stale", quiet)
    notes = [line for line in out if line.startswith("note: the library")]
    assert notes == [cli.stale_history_note(COMMIT, "quick")]
    assert "aaaaaaaaaa" in notes[0] and "perf run --suite quick --record" in notes[0]
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                          text=True, check=True).stdout.strip()
    _, out = run_gate(tmp_path / "fresh", quiet, history_commit=head)
    assert not any(line.startswith("note: the library") for line in out)


def test_noise_and_gate_share_the_log_scale():
    assert math.log1p(rules.MIN_EFFECT["cpu"]) < noise.UNSTABLE * rules.SCREEN_SPREADS


def _perf_run_record(history_dir: Path, values: dict, processes: int) -> int:
    """``perf run --suite quick --record`` into ``history_dir`` with a FakePool of
    ``values`` in place of measuring processes."""
    from perf.cli import run_command

    parser = argparse.ArgumentParser()
    add_subcommands(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["perf", "run", "--suite", "quick", "--record", "--processes",
                              str(processes), "--history", str(history_dir), "--max-wait",
                              "0", "--load-limit", "1000"])
    return run_command(args, pool_factory=lambda tree, log: FakePool(values),
                       count_factory=fake_counts())


def test_run_records_a_history_file(tmp_path):
    """``perf run --record`` writes one history file: header (commit, load, versions) and
    every measured series with one sample per fresh process."""
    values = {"compile:m": {"compile/m/cpu/total": ("cpu", 1.0)},
              "canary": {"canary/cpu": ("cpu", 1.0)}}
    assert _perf_run_record(tmp_path, values, processes=2) == 0
    run, = store.load_runs(tmp_path)
    assert run.header["suite"] == "quick" and len(run.header["commit"]) == 40
    assert run.header["loaded"] is False and len(run.header["load"]["start"]) == 3
    assert len(run.series["compile/m/cpu/total"].samples) == 2


def test_a_series_measured_only_before_a_machine_change_is_new(tmp_path):
    """After a machine annotation a series with no runs since (it stopped being measured,
    or comes back) has no baseline: the screen calls it new, the dashboard draws it."""
    from perf.gate import dashboard

    for i, (commit, names) in enumerate([("a" * 40, ("x/cpu", "old/cpu"))] * 3
                                        + [("b" * 40, ("x/cpu",))] * 3):
        head = {"commit": commit, "parent": None, "suite": "quick", "machine": {},
                "time": f"2026-01-01T00:{i:02d}:00Z", "load": {}, "loaded": False,
                "versions": {}, "dirty": False}
        store.write_run(head, [{"name": n, "unit": "s", "type": "cpu", "samples": [1.0]}
                                 for n in names], tmp_path)
    store.annotate("*", "b" * 10, "machine", "a new runner", tmp_path)
    runs = store.load_runs(tmp_path)
    rows = {r.name: r for r in rules.screen(series_of({"x/cpu": ("cpu", 1.0),
                                                     "old/cpu": ("cpu", 5.0)}), runs)}
    assert rows["old/cpu"].verdict == "new" and rows["x/cpu"].verdict == "ok"
    assert "old/cpu" in dashboard.suite_section("quick", runs, None,
                                                 store.load_annotations(tmp_path))


def test_every_round_of_a_run_measures_on_fresh_servers(tmp_path):
    """Servers are a unit of noise (a server's heap and layout are shared by every child
    it forks), so runs must sample several: each round of every calibration run measures
    on new measuring servers."""
    from perf.cli import calibrate_command

    parser = argparse.ArgumentParser()
    add_subcommands(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["perf", "calibrate", "--suite", "quick", "--runs", "5",
                              "--history", str(tmp_path), "--noise", str(tmp_path / "n.json"),
                              "--max-wait", "0", "--load-limit", "1000"])
    values = {"compile:m": {"compile/m/cpu/total": ("cpu", 1.0)},
              "canary": {"canary/cpu": ("cpu", 1.0)}}
    opened: list[FakePool] = []

    def factory(tree, log):
        opened.append(FakePool(values))
        return opened[-1]

    assert calibrate_command(args, pool_factory=factory, count_factory=fake_counts()) == 0
    assert len(opened) == 5 * 2 and all(p.calls == ["compile:m", "canary"] for p in opened)
    runs = store.load_runs(tmp_path)
    assert len(runs) == 5
    # each series records its rounds, so the statistic can take each round's minimum
    assert {s.rounds for r in runs for s in r.series.values()
            if s.type != "work"} == {len(opened) // 5}
    # the count tier: one process per group (counts repeat exactly)
    assert {s.rounds for r in runs for s in r.series.values() if s.type == "work"} == {1}
    # --from-history measures nothing: the same spreads from the recorded runs
    written = (tmp_path / "n.json").read_text()
    (tmp_path / "n.json").unlink()
    again = parser.parse_args(["perf", "calibrate", "--from-history", runs[0].commit[:10],
                               "--history", str(tmp_path), "--noise", str(tmp_path / "n.json")])
    assert calibrate_command(again, pool_factory=None) == 0
    assert _spreads(tmp_path / "n.json") == _spreads(written)
    with pytest.raises(ValueError, match="no quick run at commit 'deadbeef'"):
        calibrate_command(parser.parse_args(["perf", "calibrate", "--from-history", "deadbeef",
                                             "--history", str(tmp_path)]), pool_factory=None)


def _spreads(path_or_text) -> dict:
    text = path_or_text if isinstance(path_or_text, str) else path_or_text.read_text()
    return json.loads(text)["series"]


def _server_environment(monkeypatch, counts: bool = False) -> dict:
    """The environment a measuring server (a count server if counts) is started with: its
    Popen is stopped there."""
    import subprocess

    from perf.gate import worker

    seen = {}

    class Stop(Exception):
        pass

    def popen(cmd, **kwargs):
        seen.update(kwargs["env"])
        raise Stop

    monkeypatch.setattr(subprocess, "Popen", popen)
    pool = worker.CountPool(families=False) if counts else worker.Pool()
    with pytest.raises(Stop):
        pool.families()
    return seen


def test_measuring_servers_pin_the_malloc_mmap_threshold(monkeypatch):
    """Each measuring server starts with glibc's mmap threshold fixed (the variable turns
    glibc's dynamic threshold off), so a child's peak RSS does not depend on its server."""
    assert _server_environment(monkeypatch)["MALLOC_MMAP_THRESHOLD_"] == str(128 * 1024)


@pytest.mark.parametrize("counts", [False, True])
def test_measuring_servers_see_no_gpu(monkeypatch, counts):
    """Note [A server sees no GPU]: on the lent H200 host a count server's forked children
    died initializing CUDA. Servers of both tiers start with no GPU visible, whatever the
    caller's CUDA_VISIBLE_DEVICES; only a count server fixes the hash seed."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    monkeypatch.delenv("PYTHONHASHSEED", raising=False)
    seen = _server_environment(monkeypatch, counts)
    assert seen["CUDA_VISIBLE_DEVICES"] == ""
    assert seen.get("PYTHONHASHSEED") == ("0" if counts else None)


@pytest.mark.parametrize("flags,message", [
    (["--base", "nosuchrev"], "--base 'nosuchrev' is not a commit of this clone"),
    (["--ab-each", "4", "--base", "nosuchrev"], "--base 'nosuchrev' is not a commit"),
    (["--ab-each", "3"], "--ab-each must be a positive even number")])
def test_bad_gate_arguments_fail_before_anything_is_measured(tmp_path, flags, message):
    """Issue 36: ``perf gate --base nosuchrev`` ran the whole screen (minutes) before it
    found the base missing. Every argument is checked first: no measuring server starts."""
    def no_pool(tree, log):
        raise AssertionError("a measuring server was started before the arguments were checked")

    parser = argparse.ArgumentParser()
    add_subcommands(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["perf", "gate", "--history", str(tmp_path / "none"), *flags])
    with pytest.raises(ValueError, match=re.escape(message)):
        gate_command(args, pool_factory=no_pool)


def test_base_is_resolved_to_its_commit():
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                          text=True, check=True).stdout.strip()
    assert resolve_commit("HEAD") == head
    assert resolve_commit(head[:12]) == head

