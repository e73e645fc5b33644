"""The regression gate's tests' fakes: a synthetic history, a measuring pool that yields
fixed values, and ``perf gate`` run with them (tests/test_perf_gate.py,
tests/test_perf_gate_foreign.py)."""

from __future__ import annotations

import argparse
import contextlib

from perf.cli import add_subcommands, gate_command
from perf.gate import store, suites
from perf.gate.worker import MeasureError

COMMIT = "a" * 40


def history_runs(tmp_path, values: dict[str, tuple[str, list[float]]], n: int = 10,
          commit: str = COMMIT):
    """``n`` history runs; run i holds values[name][1][i % len] for each series."""
    for i in range(n):
        head = {"commit": commit, "parent": None, "suite": "quick",
                "time": f"2026-01-01T00:{i:02d}:00Z", "machine": {}, "load": {},
                "loaded": False, "versions": {}, "dirty": False}
        series = [{"name": name, "unit": "s", "type": type_,
                   "samples": [vals[i % len(vals)]]} for name, (type_, vals) in values.items()]
        store.write_run(head, series, tmp_path)
    return store.load_runs(tmp_path)


def series_of(values: dict[str, tuple[str, float]]) -> dict[str, store.Series]:
    return {n: store.Series(n, "s", t, [v]) for n, (t, v) in values.items()}


QUIET = [1.0, 1.01, 0.99, 1.02, 0.98, 1.0, 1.01, 0.99]  # spread ~0.015 of log values


class FakePool:
    """Stands for the measuring servers: each group yields fixed values (times a factor
    per tree), so the CLI's decisions can be checked without fresh processes."""

    def __init__(self, values, factor=1.0, fails=None, fails_after=0):
        self.values, self.factor, self.calls = values, factor, []
        self.fails, self.fails_after = fails, fails_after  # raise ``fails`` after N calls

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass

    def families(self):
        return []

    def measure(self, group, inject=None, cases=None):
        if self.fails and len(self.calls) >= self.fails_after:
            raise MeasureError(self.fails)
        self.calls.append(group)
        k = len(self.calls)
        jitter = self.factor * (1 + 0.001 * (k % 3))
        return {n: {"type": t, "unit": "s",
                    "value": v if t in ("count", "work") else v * jitter}
                for n, (t, v) in self.values[group].items()}


COUNTED = {"compile:m": {"compile/m/ops/lowering": ("work", 1000.0)}}


def fake_counts(values=COUNTED):
    """A count_factory: the count tier's server replaced by fixed counts."""
    return lambda tree, log, models: FakePool(values)


def one_model_suite(monkeypatch):
    """The quick suite as one model ``m`` (2 processes), no families: what FakePool knows
    (each test file makes it an autouse fixture)."""
    monkeypatch.setitem(suites.SUITES, "quick", suites.Suite("quick", ("m",), 2, families=False))


def base_values(extra=None) -> dict:
    return {"compile:m": {"compile/m/cpu/total": ("cpu", 1.0),
                          "compile/m/count/layers": ("count", 10.0), **(extra or {})},
            "canary": {"canary/cpu": ("cpu", 1.0)}}


def run_gate(tmp_path, current, base_factor=1.0, current_factor=1.0, base_fails=None,
          current_fails=None, history_commit=COMMIT, counted=COUNTED, history_factor=1.0,
          extra=None, args=(), pools=None, count_factory=None):
    """``perf gate`` with fake pools: ``current`` the time tier's values, ``counted`` the
    count tier's; the history holds 10 quiet runs of 1.0 s (x ``history_factor``: recorded
    on another machine) and 1000 counted ops, and ``extra`` series of group ``compile:m``
    (name: (type, value)) in the history and the base; ``args`` more gate arguments;
    ``pools`` (a dict) gets the fake pools used (``None``: the working tree, ``"base"``),
    and may hold some to use."""
    history_values = base_values(extra)
    runs_dir = tmp_path / "history"
    scale = history_factor if isinstance(history_factor, dict) else {}
    recorded = {n: (t, [v * f * scale.get(n, 1.0 if scale else history_factor) for f in QUIET])
                for g in history_values.values() for n, (t, v) in g.items()}
    recorded["compile/m/count/layers"] = ("count", [10.0])
    recorded["compile/m/ops/lowering"] = ("work", [1000.0])
    history_runs(runs_dir, recorded, commit=history_commit)
    # the screen measures 2 groups in 2 rounds; ``current_fails`` comes after it
    pools = {} if pools is None else pools
    pools.setdefault(None, FakePool(current, current_factor, current_fails, fails_after=4))
    pools.setdefault("base", FakePool(history_values, base_factor, base_fails))
    out: list[str] = []
    parser = argparse.ArgumentParser()
    add_subcommands(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["perf", "gate", "--suite", "quick", "--history", str(runs_dir),
                              "--noise", str(tmp_path / "none.json"), "--max-wait", "0",
                              "--load-limit", "1000", *args])
    code = gate_command(args, pool_factory=lambda tree, log: pools[tree],
                        checkout=lambda rev: contextlib.nullcontext("base"), out=out.append,
                        count_factory=count_factory or fake_counts(counted))
    return code, out


QUIET_TREE = {"compile:m": {"compile/m/cpu/total": ("cpu", 1.0),
                             "compile/m/count/layers": ("count", 10.0)},
              "canary": {"canary/cpu": ("cpu", 1.0)}}


