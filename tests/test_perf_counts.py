"""The count tier with a real count server (perf/gate/counting.py): counts of one compile
repeat exactly in fresh processes, a test-only 5% of extra work in one phase moves that
phase's counted bytecodes by about 5% and nothing else, and the gate's rule calls it
REGRESSED. Counts, not timings."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from perf.gate import rules, store
from perf.gate.worker import CountPool

MODEL = "lgamma_graph"  # the quick suite's smallest compile


@pytest.fixture(scope="module")
def counts():
    with CountPool(models=(MODEL,), families=False) as pool:
        plain = [pool.measure(f"compile:{MODEL}") for _ in range(2)]
        more = pool.measure(f"compile:{MODEL}", {"count_more": 0.05, "phase": "lowering"})
    return plain, more


def test_counts_repeat_exactly(counts):
    (first, second), _ = counts
    assert first == second
    phases = {n.split("/")[-1] for n in first if "/ops/" in n}
    assert {"capture", "lowering", "partition", "conversion", "engine", "build", "weights",
            "other", "total"} <= phases
    assert all(v["type"] == "work" for v in first.values())
    assert first[f"compile/{MODEL}/ops/lowering"]["value"] > 1000
    assert first[f"compile/{MODEL}/trt_calls/total"]["value"] > 0  # TensorRT API calls seen
    assert first[f"compile/{MODEL}/torch_calls/total"]["value"] > 0


def test_extra_work_in_one_phase_moves_that_phase_only(counts):
    (plain, _), more = counts
    ratios = {n: more[n]["value"] / plain[n]["value"] for n in plain if plain[n]["value"]}
    assert 1.03 < ratios[f"compile/{MODEL}/ops/lowering"] < 1.08
    moved = {n for n, r in ratios.items() if r != 1.0}
    assert moved <= {f"compile/{MODEL}/{k}/{p}" for k in ("ops", "calls")
                     for p in ("lowering", "total")}
    current = {n: store.Series(n, v["unit"], v["type"], [v["value"]]) for n, v in more.items()}
    # the history run was marked loaded: load cannot change a count, so it still counts
    row = next(r for r in rules.screen(current, [_run(plain)], annotations=[])
               if r.name == f"compile/{MODEL}/ops/lowering")
    assert row.verdict == "suspect" and rules.recounted(row, row.value)
    assert row.spread.source == "default" and row.spread.value == 0.0


def _run(series: dict) -> store.Run:
    head = {"commit": "a" * 40, "parent": None, "suite": "quick", "time": "2026-01-01T00:00:00Z",
            "machine": {}, "load": {}, "loaded": True, "versions": {}, "dirty": False}
    return store.Run(head, {n: store.Series(n, v["unit"], v["type"], [v["value"]])
                            for n, v in series.items()}, Path("run.jsonl"))


def test_recorded_counts_repeat_exactly():
    """The count tier's recorded runs (perf-data/history) at one commit hold one value per
    counted series, whatever the load they ran under (one beside a memory hog and a CPU
    burner, one at load 20: both marked loaded, which a count ignores)."""
    by_commit: dict[str, list[store.Run]] = {}
    for run in store.load_runs(suite="quick"):
        if any(s.type == "work" for s in run.series.values()):
            by_commit.setdefault(run.commit, []).append(run)
    assert any(len(runs) >= 2 for runs in by_commit.values())
    for runs in by_commit.values():
        names = {n for r in runs for n, s in r.series.items() if s.type == "work"}
        assert len(names) > 100
        for name in names:
            assert len({r.series[name].statistic() for r in runs if name in r.series}) == 1


def test_counts_equal_on_an_emulated_cpu_three_times_slower():
    """perf-data/results/count_spread_emulated_*.json (``python -m
    perf.studies.emulated_counts``, issue 38): at least 5 count runs of the quick suite on
    this machine and 3 on another x86-64 CPU emulated by qemu (no AVX: torch's CPU
    capability differs), whose canary is at least 3x slower, give one value per counted
    series: a spread of 0 on both machines and between them, and on every machine added
    later with ``--again`` (another boot, with what identifies it)."""
    files = sorted((store.DATA / "results").glob("count_spread_emulated_*.json"))
    assert files
    for path in files:
        machines = json.loads(path.read_text())["machines"]
        here, emulated = machines["native"], machines["emulated"]
        assert len(here["runs"]) >= 5 and len(emulated["runs"]) >= 3
        canary = {name: min(c["canary"] for c in m["canaries"]) for name, m in machines.items()}
        assert canary["emulated"] > 3 * canary["native"], canary
        assert here["canaries"][0]["capability"] != emulated["canaries"][0]["capability"]
        for name, again in machines.items():
            if name not in ("native", "emulated"):
                assert len(again["runs"]) >= 3 and again["identity"]["boot_id"], name
        runs = [run for m in machines.values() for run in m["runs"]]
        assert len(runs[0]) > 100 and all(run.keys() == runs[0].keys() for run in runs)
        assert [n for n in runs[0] if len({run[n] for run in runs}) > 1] == [], path.name


def test_counts_equal_on_a_second_physical_host():
    """Issue 38: the lent GPU host (an Intel Xeon under a Firecracker kernel, 16 cores, an
    H200 and its driver; this machine: an AMD EPYC VM, 2 cores, no GPU) ran the count tier
    with this machine's own Python, torch and TensorRT carried there
    (``perf.studies.carried_counts``): on three boots, two with the GPU visible to the run,
    at least 3 runs each gave every series the value every run here gave."""
    machines = json.loads((store.DATA / "results" / "count_spread_emulated_c49.json")
                          .read_text())["machines"]
    here = machines["native"]
    hosts = {name: m for name, m in machines.items()
             if m["what"].split()[0] != here["what"].split()[0] and name != "emulated"}
    assert len(hosts) >= 3, sorted(machines)
    assert len({m["identity"]["boot_id"] for m in hosts.values()}) == len(hosts)
    for name, host in hosts.items():
        assert len(host["runs"]) >= 3, name
        assert host["identity"]["kernel"] != machines["native_c51"]["identity"]["kernel"]
        assert all(run == here["runs"][0] for run in host["runs"]), name


def test_count_sensitivity_on_recorded_trials():
    """perf-data/results/count_sensitivity.json (python -m perf.gate.count_sensitivity):
    extra work of 2-50% in one phase, one whole compile and one converter family is
    REGRESSED in every trial by the count tier's rule (re-judged here from the recorded
    ratios), the unchanged tree in none, and no series the injections did not aim at."""
    from perf.gate.count_sensitivity import summarize

    results = json.loads((store.DATA / "results" / "count_sensitivity.json").read_text())
    found = summarize(results)
    assert set(found["trials"]) >= {"0", "0.02", "0.05", "0.1", "0.2"}
    for cells in found["flagged"].values():
        for effect, hits in cells.items():
            assert hits == (found["trials"][effect] if float(effect) >= 0.02 else 0)
    assert set(found["controls_regressed"].values()) == {0}
    threshold = math.log1p(rules.MIN_EFFECT["work"])
    for trial in results["trials"]:
        for series, ratio in trial["ratios"].items():
            assert (math.log(ratio) > threshold) == (series in trial["regressed"])
            assert (trial["effect"] == 0) == (ratio == 1.0)


def test_five_percent_in_one_phase_regressed_in_20_of_20_trials():
    """perf-data/results/count_sensitivity_20x5pct.json (issue 38: ``python -m
    perf.gate.count_sensitivity --trials 20 --effects 0.05``, against 9 count runs of the
    same commit): 5% more work in one phase, one whole compile and one family is REGRESSED
    in all 20 trials, re-judged here from the recorded ratios, and nothing else is."""
    from perf.gate.count_sensitivity import summarize

    results = json.loads((store.DATA / "results" / "count_sensitivity_20x5pct.json")
                         .read_text())
    found = summarize(results)
    assert found["trials"] == {"0.05": 20}
    assert {k: v["0.05"] for k, v in found["flagged"].items()} == {
        "phase": 20, "compile": 20, "family": 20}
    assert found["controls_regressed"] == {"0.05": 0}
    threshold = math.log1p(rules.MIN_EFFECT["work"])
    for trial in results["trials"]:
        for series, ratio in trial["ratios"].items():
            assert (math.log(ratio) > threshold) == (series in trial["regressed"])


def test_the_llm_group_counts_compile_and_generation_exactly():
    """The quick suite's decoder group (issue 39): llm.compile per phase and the greedy
    generation as phase ``generate`` repeat exactly in fresh processes of one count server,
    and 5% more work in generation moves only that phase and the total."""
    from perf.gate.suites import group_of, is_compile, suite

    quick = suite("quick")
    assert "llm:gpt2" in quick.built and "llm:gpt2" in quick.groups([])
    assert group_of("llm/gpt2/latency/decode") == "llm:gpt2"
    assert is_compile("llm/gpt2/cpu/total") and not is_compile("family/unary/cpu")
    with CountPool(models=("llm:gpt2",), families=False) as pool:
        first, second = (pool.measure("llm:gpt2") for _ in range(2))
        more = pool.measure("llm:gpt2", {"count_more": 0.05, "phase": "generate"})
    # only our own bytecodes and TensorRT calls: torch's Python calls under export moved
    assert first == second and all("/ops/" in n or "/trt_calls/" in n for n in first)
    assert first["llm/gpt2/ops/generate"]["value"] > 10_000  # the executor's steps
    assert first["llm/gpt2/trt_calls/total"]["value"] > 0
    ratios = {n: more[n]["value"] / first[n]["value"] for n in first if first[n]["value"]}
    assert 1.03 < ratios["llm/gpt2/ops/generate"] < 1.08
    assert {n for n, r in ratios.items() if r != 1.0} <= {
        f"llm/gpt2/ops/{p}" for p in ("generate", "total")}
