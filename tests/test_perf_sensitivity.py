"""The gate's sensitivity (perf/gate/sensitivity.py, perf/gate/inject.py): the recorded
trials re-judged from their samples (on the history's machine, and on one whose canary read
x3.75-x3.88 of the history's), the test-only injections, and the extension of a
confirmation close to the line (issue 38)."""

from __future__ import annotations

import argparse
import json

import pytest

from perf.gate import rules, store

SENSITIVITY = store.DATA / "results" / "sensitivity.json"


def test_verdicts_on_recorded_samples():
    """The whole gate's sensitivity, on the trials perf/gate/sensitivity.py recorded (each one a
    complete gate run with three test-only slowdowns, so the answers are known). Each
    confirmation's verdict is re-derived from its samples, and the rates are the issue's:
    the family made 20% slower REGRESSED in >= 19 of 20 trials, the whole compile made 30%
    slower (every model) REGRESSED in >= 19 of 20, the unsupported op flagged in every
    trial, no other series REGRESSED in more than 1 of 20, and every A/B of a slowed
    compile confirmed it."""
    from perf.gate.sensitivity import summarize

    results = json.loads(SENSITIVITY.read_text())
    n = len(results["trials"])
    assert n >= 20
    for trial in results["trials"]:
        for series, v in trial["confirmations"].items():
            c = rules.Confirmation(series, v["type"], v["a"], v["b"])
            assert c.regressed == v["regressed"]
            assert c.pvalue == pytest.approx(v["pvalue"])
            assert (series in trial["regressed"]) == c.regressed
    found = summarize(results)
    assert found["flagged"]["family"] >= 0.95 * n, found
    assert found["flagged"]["compile"] >= 0.95 * n, found
    assert found["flagged"]["unsupported"] == n, found
    assert all(k <= max(1, 0.05 * n) for k in found["controls_regressed"].values()), found
    for trial in results["trials"]:  # every A/B of a slowed compile confirmed it
        for target in results["params"]["targets"]["compile"]:
            c = trial["confirmations"].get(target)
            assert c is None or c["regressed"], (target, c)


def test_lowering_injection_spins_inside_lowering_only_and_is_removed(monkeypatch):
    """The sensitivity harness's "+40% inside lowering" (issue 38): the spin runs inside
    ``compile``'s lowering phase, sized from lower_program's own CPU, and the library's
    function is back afterwards."""
    import torch

    import torch_trt_ref
    from perf.gate import inject
    from torch_trt_ref import compiler

    plain = compiler.lower_program
    spins = []
    monkeypatch.setattr(inject, "spin", lambda seconds: spins.append(seconds))
    with inject.lowering_hook({"lowering_slower": 0.4}):
        assert compiler.lower_program is not plain
        torch_trt_ref.compile(torch.nn.Linear(4, 4).eval(), (torch.randn(2, 4),), min_block_size=1)
    assert compiler.lower_program is plain
    assert len(spins) == 1 and spins[0] > 0
    with inject.lowering_hook({"compile_slower": 0.3}):  # not a lowering spec: untouched
        assert compiler.lower_program is plain


def test_sensitivity_targets_keep_the_lowering_model_out_of_the_whole_compile():
    """Each trial tests the scenarios together: the lowering model's compile is slowed only
    in its lowering, so its total is aimed at (not a control) but is not a whole-compile
    target; the other models are."""
    from perf.gate import sensitivity

    args = argparse.Namespace(control=False, compile_slower=0.3, family="elementwise",
                              family_slower=0.2, model2="unconvertible",
                              op="aten.relu.default", lowering_model="bert_2layer",
                              lowering_slower=0.4, memory_model="resnet18", rss_more=0.1,
                              latency_slower=0.05)
    models = ("lgamma_graph", "unconvertible", "bert_2layer", "resnet18")
    inject = sensitivity.injections(args, models)
    assert inject["compile:bert_2layer"] == {"lowering_slower": 0.4}
    assert inject["compile:resnet18"] == {"compile_slower": 0.3, "rss_more": 0.1,
                                          "latency_slower": 0.05}
    goals = sensitivity.targets(args, models)
    assert "compile/bert_2layer/cpu/total" not in goals["compile"]
    assert goals["lowering"] == "compile/bert_2layer/cpu/lowering"
    assert sensitivity.is_target("compile/bert_2layer/cpu/total", goals)
    assert not sensitivity.is_target("compile/bert_2layer/cpu/conversion", goals)
    assert not sensitivity.is_target("compile/resnet18/cpu/lowering", goals)
    assert goals["memory"] == "compile/resnet18/rss/peak"
    assert sensitivity.is_target("compile/resnet18/latency", goals)
    assert not sensitivity.is_target("compile/lgamma_graph/rss/peak", goals)


def test_memory_injection_lifts_the_peak_by_its_fraction():
    """``rss_more`` (issue 38, item 3 (d)): the buffer fills the gap from the RSS now to the
    peak seen so far plus that fraction of the peak above the baseline, and its pages are
    resident (touched), so a PeakRSS block's exit sees the raised peak. In a fresh process
    with the measuring servers' malloc settings (worker.MALLOC_ENV): a long-lived test
    process may hand the buffer pages it already holds."""
    import os
    import subprocess
    import sys

    from perf.gate.worker import MALLOC_ENV, ROOT

    code = """if True:
        import argparse, json, psutil
        from perf.gate import inject
        now = psutil.Process().memory_info().rss
        seen = argparse.Namespace(baseline=now - (200 << 20), peak=now + (40 << 20))
        buffer = inject.more_memory({"rss_more": 0.1}, seen)
        after = psutil.Process().memory_info().rss
        print(json.dumps([len(buffer), after - now,
                          inject.more_memory({"compile_slower": 0.3}, seen) is None]))"""
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, env={**os.environ, **MALLOC_ENV}, check=True)
    size, grown, untouched = json.loads(out.stdout)
    assert size >= (40 << 20) + (24 << 20) - (2 << 20)  # peak + 10% of 240 MiB
    assert grown >= 0.9 * size  # resident, not just reserved
    assert untouched


def test_latency_injection_waits_its_fraction_of_each_call(monkeypatch):
    """``latency_slower`` (item 3 (e)): each call of the compiled module is followed by a
    wait of that fraction of its own wall time (a fake clock: the call takes 10 s)."""
    from perf.gate import inject

    clock = [0.0]

    def perf_counter():
        clock[0] += 0.01
        return clock[0]

    def compiled(x):
        clock[0] += 10.0
        return x + 1

    monkeypatch.setattr(inject.time, "perf_counter", perf_counter)
    slow = inject.latency_hook(compiled, {"latency_slower": 0.2})
    assert slow(1) == 2
    assert 12.0 <= clock[0] <= 12.1, clock[0]
    assert inject.latency_hook(compiled, {"rss_more": 0.2}) is compiled


class _Sequence:
    """A measuring pool that returns the next of ``values`` for series s of group g."""

    def __init__(self, values):
        self.values = list(values)

    def measure(self, group, inject=None, cases=None):
        return {"compile/m/cpu/total": {"type": "cpu", "unit": "s",
                                        "value": self.values.pop(0)}}


def test_a_confirmation_close_to_the_line_is_measured_once_more():
    """A 30% slower compile whose 6 + 6 processes include one neighbour's spike on each side
    (the samples of a trial beside other work, issue 38: x1.23, p = 0.032) is borderline;
    6 more per side make it REGRESSED. An unchanged series is not extended."""
    from perf.gate.confirm import confirm_group

    a = [1.107, 1.074, 1.31, 1.046, 1.742, 1.31] + [1.30, 1.28, 1.33, 1.29, 1.31, 1.27]
    b = [0.828, 1.359, 0.969, 0.894, 1.059, 0.989] + [1.0, 0.98, 1.02, 0.99, 1.01, 1.0]
    first = rules.Confirmation("compile/m/cpu/total", "cpu", a[:6], b[:6])
    assert not first.regressed and first.borderline
    pool_a, pool_b = _Sequence(a), _Sequence(b)
    [c] = confirm_group("compile:m", ["compile/m/cpu/total"], pool_a, pool_b, each=6)
    assert (len(c.a), len(c.b)) == (12, 12) and c.regressed
    assert not pool_a.values and not pool_b.values

    same = [1.0, 1.01, 0.99, 1.02, 0.98, 1.0]
    pool_a, pool_b = _Sequence(same + [9.0] * 6), _Sequence(same + [0.1] * 6)
    [c] = confirm_group("compile:m", ["compile/m/cpu/total"], pool_a, pool_b, each=6)
    assert (len(c.a), len(c.b)) == (6, 6) and not c.regressed and not c.borderline


FOREIGN = sorted(n.name for n in (store.DATA / "results").glob("sensitivity_foreign_*c4[35]*.json"))


@pytest.mark.parametrize("name", FOREIGN)
def test_foreign_machine_trials_re_judge(name):
    """Every trial of issue 38 on a machine whose canary read over x3 of the history's
    (perf/gate/sensitivity.py --history-scale 3, some beside a memory hog) screened A/B, and
    each of its confirmations gives the recorded verdict when re-judged from its samples."""
    results = json.loads((store.DATA / "results" / name).read_text())
    assert results["params"]["history_scale"] == 3 and results["trials"]
    for trial in results["trials"]:
        assert trial["foreign"] and trial["canary"] > 3
        for series, v in trial["confirmations"].items():
            c = rules.Confirmation(series, v["type"], v["a"], v["b"])
            assert c.regressed == v["regressed"] and (series in trial["regressed"]) == c.regressed


# recorded before the A/B screen's suspects stopped using up the history screen's budget
# (verdict.ab_screen, 03b2273): a family suspect could be crowded out, never confirmed
CROWDING_RULE = {"sensitivity_foreign_c45a.json"}


def test_foreign_machine_rates():
    """Issue 38's rates over all recorded foreign trials: the whole compile +30%, lowering
    only +40% and the unsupported op REGRESSED in at least 19 of 20 injected trials, quiet
    and beside the hog, and the family +20% in at least 19 of 20 trials where the gate
    confirmed it (in the trials before the budget fix it was left out only where 8 A/B
    screen suspects filled the budget: recorded as a suspect of the screen, not chosen); no
    other series in any trial; and in 10 trials of the unchanged tree (5 beside the hog)
    nothing REGRESSED."""
    from perf.gate.sensitivity import summarize

    injected: list[tuple[str, dict, dict]] = []
    controls = {False: 0, True: 0}  # by burner
    for name in FOREIGN:
        results = json.loads((store.DATA / "results" / name).read_text())
        found = summarize(results)
        assert found["controls_regressed"] == {}, name
        if results["params"]["control"]:
            assert found["flagged"] == dict.fromkeys(found["flagged"], 0), name
            controls[results["params"]["burner"]] += found["trials"]
        else:
            injected += [(name, results["params"]["targets"], t) for t in results["trials"]]
    assert len(injected) >= 20 and controls == {False: 5, True: 5}, (len(injected), controls)
    for scenario in ("compile", "lowering", "unsupported"):
        hits = sum(summarize({"params": {"targets": goals}, "trials": [t]})["flagged"][scenario]
                   for _, goals, t in injected)
        assert hits >= len(injected) * 19 / 20, (scenario, hits, len(injected))
    chosen = [(n, g, t) for n, g, t in injected if g["family"] in t["suspects"]]
    assert len(chosen) >= 20
    assert sum(g["family"] in t["regressed"] for _, g, t in chosen) >= len(chosen) * 19 / 20
    for name, goals, trial in injected:
        if goals["family"] not in trial["suspects"]:
            assert name in CROWDING_RULE and len(trial["suspects"]) >= rules.MAX_SUSPECTS
            assert trial["screen"][goals["family"]]["verdict"] == "suspect"


# recorded after the compiles of a foreign machine were measured once (by the A/B screen)
# and the families screened relative to their own median move (598183b, 4cfeed5)
MEASURED_ONCE = sorted(n.name for n in (store.DATA / "results").glob(
    "sensitivity_foreign_*c4[678]*.json") if "pct_" not in n.name)
# the same gate with every injection at one other size (issue 38's curve): 5, 10 and 50%
CURVE = sorted(n.name for n in (store.DATA / "results").glob("sensitivity_foreign_*pct_*.json"))


@pytest.mark.parametrize("name", MEASURED_ONCE)
def test_foreign_trials_with_compiles_measured_once(name):
    """Each trial re-judged from its samples; the compiles' samples are the A/B screen's 6
    working-tree processes (one server: one round; 12 where a series close to the line got
    6 more a side), not rounds of the screen; the families
    were screened relative to their median move; every injected scenario REGRESSED and no
    other series, and the unchanged tree nothing."""
    from perf.gate.sensitivity import summarize

    results = json.loads((store.DATA / "results" / name).read_text())
    assert results["params"]["history_scale"] == 3 and results["trials"]
    for trial in results["trials"]:
        assert trial["foreign"] and trial["canary"] > 3 and trial["families"] > 3
        for series, v in trial["confirmations"].items():
            c = rules.Confirmation(series, v["type"], v["a"], v["b"])
            assert c.regressed == v["regressed"] and (series in trial["regressed"]) == c.regressed
        totals = {n: s for n, s in trial["samples"].items() if n.endswith("/cpu/total")}
        assert totals and all(s["rounds"] == 1 and len(s["samples"]) in (  # extended:
            rules.AB_EACH, 2 * rules.AB_EACH) for s in totals.values()), totals  # 6 more
    found = summarize(results)
    assert found["controls_regressed"] == {}
    n = len(results["trials"])
    wanted = 0 if results["params"]["control"] else n
    assert found["flagged"] == dict.fromkeys(found["flagged"], wanted), found


def test_the_curve_pools_the_recorded_time_trials():
    """The sensitivity plot's time-tier points (count_sensitivity.pooled) are the trials
    summarize() counts, summed over the files: hits and trials per scenario and effect (for
    the whole compile, each slowed model's total but the unsupported op's), and the
    unchanged trees as one point at 0 with their false alarms."""
    from perf.gate import count_sensitivity
    from perf.gate.sensitivity import summarize

    files = [json.loads((store.DATA / "results" / n).read_text())
             for n in FOREIGN + MEASURED_ONCE + CURVE]
    cells = count_sensitivity.pooled(files)
    expected: dict[tuple[str, float], list[int]] = {}
    for f in files:
        if f["params"]["control"]:
            continue
        found = summarize(f)
        flagged = found["flagged"]
        totals = {k: v for k, v in found["compile_by_series"].items()
                  if f"/{f['params']['model2']}/" not in k}
        cell = expected.setdefault(("compile", f["params"]["compile_slower"]), [0, 0])
        cell[0] += sum(totals.values())
        cell[1] += len(f["trials"]) * len(totals)
        for point, scenario, effect in (
                ("family", "family", "family_slower"),
                ("phase", "lowering", "lowering_slower"), ("memory", "memory", "rss_more"),
                ("latency", "latency", "latency_slower")):
            if scenario in flagged:
                cell = expected.setdefault((point, f["params"][effect]), [0, 0])
                cell[0] += flagged[scenario]
                cell[1] += len(f["trials"])
    assert {k: v for k, v in cells.items() if k[0] != "control"} == expected
    controls = [f for f in files if f["params"]["control"]]
    assert cells[("control", 0.0)] == [0, sum(len(f["trials"]) for f in controls)]


def test_replayed_noise_gives_no_false_alarm_and_finds_half_again_on_every_total():
    """The replayed curve (sensitivity.replayed) on the recorded foreign trials: unchanged
    code on both sides is never REGRESSED (0 of every pair), every compile total's pairs
    scaled by 1.5 are, and no class is found less often at +50% than at +10%."""
    from perf.gate import sensitivity

    files = [json.loads((store.DATA / "results" / n).read_text())
             for n in FOREIGN + MEASURED_ONCE]
    found = sensitivity.replayed(files, (0.0, 0.1, 0.5))
    assert set(found) == {"total", "phase", "latency"}
    for cls, cells in found.items():
        assert cells[0.0]["regressed"] == 0 and cells[0.0]["pairs"] >= 40, (cls, cells)
        assert cells[0.1]["regressed"] <= cells[0.5]["regressed"], (cls, cells)
    assert found["total"][0.5]["regressed"] == found["total"][0.5]["pairs"]
    table = sensitivity.replay_table(found)
    assert "| total | " in table and table.count("\n") == 4 and "1.00 (1.00) |" in table


def test_latency_is_timed_after_its_warm_up_time(monkeypatch):
    """Note [Latency warm-up] (perf/gate/measure.py): the calls of a small graph's first
    milliseconds are not timed; with a fake clock where a call lasts 1 ms, the first timed
    call comes after LATENCY_WARMUP_SECONDS of calls (one call of a longer graph)."""
    from perf.gate import measure

    clock, calls = [0.0], []

    def perf_counter():
        return clock[0]

    def compiled(duration):
        calls.append(clock[0])
        clock[0] += duration
        return duration

    monkeypatch.setattr(measure.time, "perf_counter", perf_counter)
    assert measure._latency(compiled, (0.001,), {}) == pytest.approx(0.001)
    warm_up = round(measure.LATENCY_WARMUP_SECONDS / 0.001)  # (+-1: the clock is a float)
    assert abs(len(calls) - warm_up - measure.LATENCY_RUNS) <= 1, len(calls)
    calls.clear()
    measure._latency(compiled, (0.1,), {})  # one warm-up call, then at least 3 timed
    assert len(calls) == 1 + 5, len(calls)


# what each file of the curve found, as docs/regressions.md reports it: scenarios flagged
# ("compile": trials with a slowed model's total REGRESSED, not counting the unsupported
# op's model, whose partition moves its total at any size: 5 of 5 trials at 2%),
# trials with each slowed compile (lgamma_graph, resnet18) REGRESSED, and control series
# REGRESSED (session 49's one false alarm: family/random/cpu x1.27, p = 0.0057)
SCENARIOS = ("family", "compile", "unsupported", "lowering", "memory", "latency")


def every(trials: int, **fewer) -> dict[str, int]:
    """Each scenario flagged in ``trials`` trials, but those named in ``fewer``."""
    return {**dict.fromkeys(SCENARIOS, trials), **fewer}


CURVE_FOUND = {
    "sensitivity_foreign_50pct_c47.json": (every(1), 2, {}),
    "sensitivity_foreign_burner_20pct_c48.json": (every(2), 4, {}),
    "sensitivity_foreign_burner_20pct_c53.json": (every(13, lowering=9), 25, {}),
    "sensitivity_foreign_burner_20pct_c53b.json": (every(4, lowering=3), 8, {}),
    "sensitivity_foreign_burner_20pct_c54.json": (every(1), 2, {}),
    "sensitivity_foreign_burner_30pct_c54.json": (every(20), 40, {}),
    "sensitivity_foreign_burner_10pct_c54.json": (every(9, compile=4, lowering=1, latency=1), 4,
                                                  {}),
    "sensitivity_foreign_burner_10pct_c55.json": (every(11, family=8, compile=10, lowering=1,
                                                        latency=5), 12, {}),
    "sensitivity_foreign_burner_50pct_c55.json": (every(20), 40, {}),
    "sensitivity_foreign_burner_5pct_c56.json": (every(0, family=4, unsupported=20), 0, {}),
    "sensitivity_foreign_burner_2pct_c56.json": (every(0, unsupported=20), 0, {}),
    "sensitivity_foreign_10pct_c47.json": (every(2, compile=1, lowering=0, latency=0), 2, {}),
    "sensitivity_foreign_10pct_c49.json": (every(18, family=16, compile=10, lowering=4,
                                                 latency=3), 11, {"family/random/cpu": 1}),
    "sensitivity_foreign_20pct_c50.json": (every(20, family=17, compile=19, lowering=12,
                                                 latency=19), 25, {}),
    "sensitivity_foreign_30pct_c51.json": (every(20, lowering=19), 40, {}),
    "sensitivity_foreign_50pct_c51.json": (every(9), 18, {}),
    "sensitivity_foreign_50pct_c52.json": (every(10), 20, {}),
    "sensitivity_foreign_2pct_c52.json": (every(0, unsupported=5), 0, {}),
    "sensitivity_foreign_2pct_c53.json": (every(0, unsupported=15), 0, {}),
    "sensitivity_foreign_5pct_c47.json": (every(0, unsupported=1), 0, {}),
    "sensitivity_foreign_5pct_c52.json": (every(0, family=5, unsupported=20), 0, {}),
}


@pytest.mark.parametrize("hog", [False, True])
@pytest.mark.parametrize("size", [2, 5, 10, 20, 30, 50])
def test_the_curve_holds_20_trials_at(size, hog):
    """Issue 38's curve: at least 20 trials at each size, quiet and beside the hog
    (``--burner``), every injection at that size in each file (which files and sessions:
    docs/regressions.md, the curve's bullets)."""
    files = [json.loads((store.DATA / "results" / n).read_text()) for n in CURVE
             if f"_{size}pct" in n and ("_burner_" in n) == hog]
    assert sum(len(r["trials"]) for r in files) >= 20
    for r in files:
        assert r["params"]["burner"] == hog
        assert {r["params"][k] for k in ("compile_slower", "family_slower", "lowering_slower",
                                         "rss_more", "latency_slower")} == {size / 100}


@pytest.mark.parametrize("name", CURVE)
def test_curve_trials_re_judge(name):
    """Each file of the curve (every size, quiet and beside the hog): every confirmation
    re-judged from its samples, and what the file found exactly as CURVE_FOUND records it
    (scenarios flagged, slowed-model trials REGRESSED, control series REGRESSED), the
    figures docs/regressions.md's curve table reports."""
    from perf.gate.sensitivity import summarize

    results = json.loads((store.DATA / "results" / name).read_text())
    assert results["params"]["history_scale"] == 3 and not results["params"]["control"]
    for trial in results["trials"]:
        assert trial["foreign"] and trial["canary"] > 3
        for series, v in trial["confirmations"].items():
            c = rules.Confirmation(series, v["type"], v["a"], v["b"])
            assert c.regressed == v["regressed"] and (series in trial["regressed"]) == c.regressed
    found = summarize(results)
    flagged, slowed, controls = CURVE_FOUND[name]
    assert found["controls_regressed"] == controls
    assert found["flagged"] == flagged
    by_model = {k: v for k, v in found["compile_by_series"].items() if "unconvertible" not in k}
    assert sum(by_model.values()) == slowed, by_model


def test_the_injected_lowering_slows_the_phase_after_it():
    """Note [The phase after the spin] (perf/gate/sensitivity.py): bert_2layer's partition,
    the phase after the injected lowering, reads slower in the foreign trials that injected
    20% or more (A/B ratio over 1.0 in at least 90% of them, median over 1.05; the ratios
    per session are in the Note) and not in the unchanged trees
    (median under 1.0), so the trials count it as touched, not as a control."""
    import statistics

    ratios: dict[bool, list[float]] = {True: [], False: []}
    for name in FOREIGN + MEASURED_ONCE + CURVE:
        results = json.loads((store.DATA / "results" / name).read_text())
        if 0 < results["params"]["lowering_slower"] < 0.2 and not results["params"]["control"]:
            continue
        for trial in results["trials"]:
            v = trial["ab_screen"].get("compile/bert_2layer/cpu/partition")
            if v:
                ratios[not results["params"]["control"]].append(v["ratio"])
    assert len(ratios[True]) >= 30 and len(ratios[False]) >= 10
    assert sum(r > 1.0 for r in ratios[True]) >= 0.9 * len(ratios[True])
    assert statistics.median(ratios[True]) > 1.05
    assert statistics.median(ratios[False]) < 1.0
