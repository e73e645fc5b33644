"""perf.gate.store (append-only run files, annotations, sqlite reader), perf.gate.noise (spread
and baseline since the last change) and perf.gate.steps (open regressions) on small written
histories."""

import json
import math
import random
import statistics
import subprocess

import pytest

from perf.gate import noise, steps, store

SERIES = "compile_cpu_s/resnet18"


def header(i: int, loaded: bool = False, commit: str | None = None) -> dict:
    return {"commit": commit or f"{i:04d}" + "c0ffee" * 6, "parent": None, "suite": "quick",
            "time": f"2026-11-{1 + i // 60:02d}T10:{i % 60:02d}:00Z",
            "machine": {"cpu": "test", "cores": 2, "mem_gib": 8.0, "node": "n"},
            "load": {"start": [0.5, 0.5, 0.5], "end": [0.6, 0.5, 0.5]}, "loaded": loaded,
            "versions": {"python": "3", "torch": "2", "tensorrt": "1", "transformers": "4"},
            "dirty": False}


def record(directory, levels, sd=0.02, seed=0, loaded=(), commits=None):
    """One run per level: SERIES (3 CPU-second samples around the level), an RSS series and a
    layer count."""
    rng = random.Random(seed)
    for i, level in enumerate(levels):
        store.write_run(header(i, loaded=i in loaded, commit=commits and commits[i]), [
            {"name": SERIES, "unit": "s", "type": "cpu",
             "samples": [level * math.exp(rng.gauss(0, sd)) for _ in range(3)]},
            {"name": "peak_rss_bytes/resnet18", "unit": "bytes", "type": "rss",
             "samples": [1e9, 1.01e9, 0.99e9]},
            {"name": "layers/resnet18", "unit": "count", "type": "count", "samples": [50.0]}],
            directory)
    return store.load_runs(directory)


def test_write_and_load_round_trip(tmp_path):
    path = store.write_run(header(0), [{"name": SERIES, "unit": "s", "type": "cpu",
                                          "samples": [2.0, 1.5, 1.7]}], tmp_path)
    assert path.name == "20261101T100000Z_0000c0ffee_quick.jsonl"
    first = json.loads(path.read_text().splitlines()[0])
    assert first["kind"] == "header" and first["schema"] == 1
    [run] = store.load_runs(tmp_path)
    assert run.commit == header(0)["commit"] and run.series[SERIES].statistic() == 1.5


def test_statistic_per_type():
    assert store.Series("a", "s", "cpu", [3.0, 1.0, 2.0]).statistic() == 1.0
    assert store.Series("a", "bytes", "rss", [3.0, 1.0, 2.0]).statistic() == 2.0
    assert store.Series("a", "count", "count", [7.0, 7.0]).statistic() == 7.0


def test_time_statistic_is_the_mean_of_each_rounds_minimum():
    # rounds of [1, 5, 9], [3, 2, 7], [4, 8, 6]: minima 1, 2, 4
    s = store.Series("a", "s", "cpu", [1.0, 5.0, 9.0, 3.0, 2.0, 7.0, 4.0, 8.0, 6.0], 3)
    assert s.round_samples() == [[1.0, 5.0, 9.0], [3.0, 2.0, 7.0], [4.0, 8.0, 6.0]]
    assert s.statistic() == pytest.approx(7 / 3)
    assert store.Series("a", "s", "latency", s.samples, 1).statistic() == 1.0
    # samples that do not split into the rounds (a round lost one): the minimum of all
    assert store.Series("a", "s", "cpu", s.samples[:8], 3).statistic() == 1.0
    # RSS and counts ignore rounds
    assert store.Series("a", "bytes", "rss", s.samples, 3).statistic() == 5.0


def test_rounds_are_written_checked_and_inferred_for_older_records(tmp_path):
    samples = [1.0, 5.0, 3.0, 2.0, 4.0, 8.0]
    store.write_run(header(0), [{"name": SERIES, "unit": "s", "type": "cpu",
                                   "samples": samples, "rounds": 2}], tmp_path)
    [run] = store.load_runs(tmp_path)
    assert run.series[SERIES].rounds == 2 and run.series[SERIES].statistic() == 1.5
    with pytest.raises(ValueError, match="dividing its 6 samples"):
        store.write_run(header(1), [{"name": SERIES, "unit": "s", "type": "cpu",
                                       "samples": samples, "rounds": 4}], tmp_path)
    # a record written before series carried rounds: the canary loop ran once a round
    old = tmp_path / "old"
    path = store.write_run(header(0), [
        {"name": SERIES, "unit": "s", "type": "cpu", "samples": samples},
        {"name": "odd", "unit": "s", "type": "cpu", "samples": [3.0, 1.0, 2.0, 5.0]},
        {"name": store.LEGACY_ROUNDS_SERIES, "unit": "s", "type": "cpu",
         "samples": [1.0, 2.0, 3.0]}], old)
    path.write_text("".join(line.replace(', "rounds": 1', "") + "\n"
                            for line in path.read_text().splitlines()))
    assert '"rounds"' not in path.read_text()
    [run] = store.load_runs(old)
    assert {n: s.rounds for n, s in run.series.items()} == {
        SERIES: 3, "odd": 1, store.LEGACY_ROUNDS_SERIES: 3}
    assert run.series[SERIES].statistic() == pytest.approx((1 + 2 + 4) / 3)


def test_runs_are_append_only(tmp_path):
    a = store.write_run(header(0), [], tmp_path)
    b = store.write_run(header(0), [], tmp_path)
    assert a != b and a.exists() and b.name.endswith("-2.jsonl")


def test_bad_records_are_named(tmp_path):
    with pytest.raises(ValueError, match="lacks"):
        store.write_run({"commit": "abc"}, [], tmp_path)
    with pytest.raises(ValueError, match="accepted: cpu, wall"):
        store.write_run(header(0), [{"name": "x", "unit": "s", "type": "cpus",
                                       "samples": [1.0]}], tmp_path)
    with pytest.raises(ValueError, match="not a finite number"):
        store.write_run(header(0), [{"name": "x", "unit": "s", "type": "cpu",
                                       "samples": [1.0, float("nan")]}], tmp_path)
    (tmp_path / "broken.jsonl").write_text('{"kind": "series"\n')
    with pytest.raises(ValueError, match="broken.jsonl:1"):
        store.load_runs(tmp_path)


def test_load_runs_orders_by_time_and_filters_suite(tmp_path):
    store.write_run(header(5), [], tmp_path)
    store.write_run({**header(1), "suite": "full"}, [], tmp_path)
    store.write_run(header(3), [], tmp_path)
    assert [r.time[-5:-1] for r in store.load_runs(tmp_path)] == ["1:00", "3:00", "5:00"]
    assert len(store.load_runs(tmp_path, suite="full")) == 1


def test_sqlite_reader(tmp_path):
    runs = record(tmp_path, [1.0] * 4, loaded={2})
    cols, rows = store.query("SELECT COUNT(*), SUM(loaded) FROM runs", runs)
    assert rows == [(4, 1)]
    _, rows = store.query(f"SELECT COUNT(*) FROM samples WHERE series = '{SERIES}'", runs)
    assert rows == [(12,)]
    _, rows = store.query("SELECT value FROM stats WHERE type = 'count'", runs)
    assert rows == [(50.0,)] * 4
    with pytest.raises(ValueError, match="tables: runs"):
        store.query("SELECT nope FROM runs", runs)


def test_annotation_validation(tmp_path):
    with pytest.raises(ValueError, match="accepted: accept, ignore, machine"):
        store.annotate(SERIES, "abcdef0", "accepted", "why", tmp_path)
    with pytest.raises(ValueError, match="reason"):
        store.annotate(SERIES, "abcdef0", "accept", " ", tmp_path)
    with pytest.raises(ValueError, match="7 hex digits"):
        store.annotate(SERIES, "abc", "accept", "why", tmp_path)
    store.annotate("compile_cpu_s/*", "abcdef0", "accept", "why", tmp_path)
    [a] = store.load_annotations(tmp_path)
    assert store.annotations_for(SERIES, [a]) == [a]
    assert store.annotations_for("peak_rss_bytes/x", [a]) == []


def test_spread_sources(tmp_path):
    runs = record(tmp_path, [1.0] * 6)
    assert noise.series_spread(SERIES, runs).source == "default"
    calibration = {"series": {SERIES: {"spread": 0.03, "n": 5}}}
    assert noise.series_spread(SERIES, runs, calibration) == noise.Spread(0.03, "calibration", 5)
    runs = record(tmp_path / "more", [1.0] * 12, sd=0.02, loaded={3, 4, 5})
    spread = noise.series_spread(SERIES, runs, calibration)
    assert spread.source == "history" and spread.n == 9  # the loaded runs are left out
    assert 0.003 < spread.value < 0.05 and not spread.unstable


def test_robust_sd_ignores_an_outlier():
    values = [0.0, 0.01, -0.01, 0.02, -0.02, 0.005, -0.005, 0.015, 3.0]
    assert noise.robust_sd(values) < 0.03 < statistics.stdev(values)


def test_step_is_an_open_regression_until_annotated(tmp_path):
    runs = record(tmp_path, [1.0] * 12 + [1.3] * 6)
    [step] = steps.open_regressions(runs, [])
    assert step.series == SERIES and step.index == 12
    assert step.commit_after == runs[12].commit and step.commit_before == runs[11].commit
    assert 1.2 < step.ratio < 1.4 and "open" in step.describe()
    # the baseline is the median since the change: 6 points, so the spread is not from history
    assert noise.baseline(SERIES, runs, []) == statistics.median(
        r.series[SERIES].statistic() for r in runs[12:])
    assert noise.series_spread(SERIES, runs, None, []).source == "default"
    store.annotate("compile_cpu_s/*", step.commit_after[:10], "accept", "new pass", tmp_path)
    annotations = store.load_annotations(tmp_path)
    assert steps.open_regressions(runs, annotations) == []
    [closed] = steps.series_steps(SERIES, runs, annotations)
    assert closed.annotation["action"] == "accept"


def test_annotation_resets_the_baseline_without_a_change_point(tmp_path):
    runs = record(tmp_path, [1.0] * 10 + [1.06] * 10)  # 6%: under the minimum effect
    assert steps.series_steps(SERIES, runs, []) == []
    assert noise.baseline(SERIES, runs, []) == pytest.approx(1.03, rel=0.03)
    a = {"series": "*", "commit": runs[10].commit, "action": "machine", "reason": "new runner",
         "time": "2026-12-01T00:00:00Z"}
    after = [r.series[SERIES].statistic() for r in runs[10:]]
    assert noise.baseline(SERIES, runs, [a]) == statistics.median(after)


def test_downward_steps_and_memory_are_not_open_regressions(tmp_path):
    runs = record(tmp_path, [1.0] * 10 + [0.7] * 6)
    [step] = steps.series_steps(SERIES, runs, [])
    assert step.ratio < 1 and not step.open_regression


def test_calibrate(tmp_path):
    runs = record(tmp_path, [1.0] * 6)
    with pytest.raises(ValueError, match="one commit"):
        noise.calibrate(runs)
    same = [store.Run({**r.header, "commit": "f" * 40}, r.series, r.path) for r in runs]
    cal = noise.calibrate(same)
    assert cal["commit"] == "f" * 40 and cal["series"][SERIES]["n"] == 6
    assert cal["series"]["layers/resnet18"]["spread"] == 0.0
    with pytest.raises(ValueError, match=">= 5 runs"):
        noise.calibrate(same[:4])
    path = noise.write_calibration(cal, tmp_path / "noise.json")
    assert noise.load_calibration(path) == json.loads(json.dumps(cal))


@pytest.mark.parametrize("n", [5, 8, 12, 30])
def test_robust_sd_is_unbiased_for_normal_samples(n):
    rng = random.Random(n)
    mean = statistics.fmean(noise.robust_sd([rng.gauss(0, 0.04) for _ in range(n)])
                            for _ in range(4000))
    assert mean == pytest.approx(0.04, rel=0.04)


def test_a_step_between_reruns_of_one_commit_is_the_machines(tmp_path):
    commits = ["a" * 40] * 6 + ["b" * 40] * 6 + ["b" * 40] * 6
    runs = record(tmp_path, [1.0] * 12 + [1.3] * 6, commits=commits)
    [step] = steps.series_steps(SERIES, runs, [])
    assert step.same_commit and step.ratio > 1.2 and not step.open_regression


def _full(rev: str) -> str:
    return subprocess.run(["git", "rev-parse", rev], cwd=steps.ROOT, capture_output=True,
                          text=True, check=True).stdout.strip()


def test_a_step_between_commits_of_the_same_library_is_the_machines(tmp_path):
    """130be44 -> 95e5feb changed perf/ (the cold canary) and docs, not the library or the
    models: a step between them is the machine's (this repository's history holds one,
    lgamma_graph's conversion x1.15); 35d2bcf changed the library."""
    before, after = _full("130be443bd"), _full("95e5feb4db")
    assert steps.same_code(before, after)
    assert not steps.same_code(_full("35d2bcf^"), _full("35d2bcf"))
    assert not steps.same_code("a" * 40, "b" * 40)  # unknown to git: not the same
    runs = record(tmp_path, [1.0] * 6 + [1.3] * 6, commits=[before] * 6 + [after] * 6)
    [step] = steps.series_steps(SERIES, runs, [])
    assert not step.same_commit and step.same_code and not step.open_regression
