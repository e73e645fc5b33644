"""The conformance suite's Torch-TensorRT backend (``python -m conformance --backend
torch_tensorrt``, DESIGN D16): the summary line and triage counting here, and a small real
subset run in the peer's own environment when it is installed."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.peer_report import counts, summary_line
from conformance.peer_triage import CLASSES, TRIAGE, classify

ROOT = Path(__file__).resolve().parent.parent
PEER_VENV = Path(os.environ.get("PEER_VENV", Path.home() / ".cache" / "torch-trt-peer-venv"))
PEER_PYTHON = PEER_VENV / "bin" / "python"
LINE = re.compile(r"^peer: (\d+) cases, (\d+) converted, (\d+) pass, (\d+) fail \((\d+) peer "
                  r"bug, (\d+) executor, (\d+) deviation, (\d+) unclassified\)$")


def test_summary_line_counts_outcomes_and_classes():
    failing = "aten.add.Scalar-s0-fp32-static"
    assert classify(failing, "")[0] == "peer_bug"
    results = {"a": {"outcome": "passed"}, "b": {"outcome": "not_converted"},
               failing: {"outcome": "mismatch", "message": ""},
               "zz-unknown": {"outcome": "run_error", "message": "boom"}}
    assert counts(results)["converted"] == 3
    assert summary_line(results) == ("peer: 4 cases, 3 converted, 1 pass, 2 fail (1 peer bug, "
                                     "0 executor, 0 deviation, 1 unclassified)")


def test_triage_entries_name_a_class_and_evidence():
    for rule in TRIAGE:
        assert rule.cls in CLASSES, rule
        assert len(rule.evidence) > 40, f"{rule.cells}: evidence too short"


def test_repro_scripts_named_by_the_triage_exist_and_are_listed():
    """Every "Repro: conformance/peer_repros/NAME.py" of the triage's evidence is a script,
    and every script has a row in conformance/peer_repros/README.md's table."""
    repros = ROOT / "conformance" / "peer_repros"
    named = {m for rule in TRIAGE
             for m in re.findall(r"conformance/peer_repros/(\w+\.py)", rule.evidence)}
    assert named and all((repros / n).is_file() for n in named), sorted(named)
    table = (repros / "README.md").read_text()
    scripts = sorted(p.name for p in repros.glob("*.py") if not p.name.startswith("_"))
    assert [s for s in scripts if f"| `{s}` |" not in table] == []


@pytest.mark.skipif(not PEER_PYTHON.exists(), reason=(
    f"Torch-TensorRT's environment is not installed at {PEER_VENV} (optional, ~5 GB: "
    "../shared/peer/setup.sh makes it; set PEER_VENV to use another)"))
def test_backend_switch_on_a_small_subset(tmp_path):
    out = tmp_path / "peer.json"
    cells = ["aten.abs.default-s0-fp32-static", "aten.add.Scalar-s0-fp32-static",
             "aten.cumsum.default-s0-fp32-static"]
    args = [str(PEER_PYTHON), "-m", "conformance", "--backend", "torch_tensorrt", "--opinfo",
            "none", "-j", "1", "--json", str(out)] + [a for c in cells for a in ("--only", c)]
    done = subprocess.run(args, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    last = done.stdout.strip().splitlines()[-1]
    assert LINE.match(last), last
    got = json.loads(out.read_text())["cells"]
    assert got["aten.abs.default-s0-fp32-static"]["outcome"] == "passed"
    # alpha dropped by the peer's converter: converted, fails, classified as its bug
    assert got["aten.add.Scalar-s0-fp32-static"]["outcome"] == "mismatch"
    assert got["aten.add.Scalar-s0-fp32-static"]["class"] == "peer_bug"
    # the peer has no converter for cumsum: left to PyTorch, not a pass
    assert got["aten.cumsum.default-s0-fp32-static"]["outcome"] == "not_converted"
    assert last == ("peer: 3 cases, 2 converted, 1 pass, 1 fail (1 peer bug, 0 executor, "
                    "0 deviation, 0 unclassified)")
    assert sys.executable != str(PEER_PYTHON)


def test_a_task_collects_its_garbage_then_freezes_the_rest(monkeypatch):
    """``backend_run._run`` ends a task by collecting its garbage, then freezing what
    survives (so later automatic collections skip it): a reference cycle the task dropped is
    freed, not frozen."""
    import gc
    import types
    import weakref

    from conformance import backend_run
    from conformance.opinfo import Outcome

    class Node:
        pass

    dropped = []

    def run_case_cell(case, dtype, dynamic):
        a, b = Node(), Node()
        a.other, b.other = b, a  # a cycle: only the collector frees it
        dropped.append(weakref.ref(a))
        return Outcome("passed")

    backend = types.SimpleNamespace(run_case_cell=run_case_cell)
    monkeypatch.setitem(backend_run._WORKER, "backend", backend)
    monkeypatch.setitem(backend_run._WORKER, "cells", {"c": (None, None, False)})
    was_enabled = gc.isenabled()
    gc.disable()  # no automatic collection may free the cycle in the test's place
    try:
        got = backend_run._run(["c"])
        assert gc.get_freeze_count() > 0
        assert dropped[0]() is None
    finally:
        gc.unfreeze()
        if was_enabled:
            gc.enable()
    assert [cid for cid, _ in got] == ["c"]


_PEER_PATCHES = """
import gc
import torch
from conformance import peer
from torch.export import exported_program
from torch_tensorrt.dynamo import _compiler

scan = exported_program._collect_all_valid_cia_ops
first = scan()
assert first == scan.uncached(), "the reused scan differs from torch's"
lib = torch.library.Library("peer_scan_test", "DEF")
lib.define("twice(Tensor x) -> Tensor")
lib.impl("twice", lambda x: x * 2, "CompositeImplicitAutograd")
op = torch.ops.peer_scan_test.twice.default
again = scan()
assert op not in first and op in again, "a new registration did not make a fresh scan"
assert again == scan.uncached()

collections = []
gc.callbacks.append(lambda phase, info: collections.append(info["generation"]))
gc.disable()
_compiler.deallocate_module(torch.nn.Linear(2, 2))
assert collections == [], f"deallocate_module collected: {collections}"
print("ok")
"""


@pytest.mark.skipif(not PEER_PYTHON.exists(), reason=(
    f"Torch-TensorRT's environment is not installed at {PEER_VENV}"))
def test_peer_patches_reuse_the_cia_scan_until_the_dispatcher_changes():
    """In the peer's environment, ``conformance.peer`` reuses torch's scan for the ops
    export may keep (equal to torch's own scan, redone when an op is registered) and its
    ``deallocate_module`` runs no garbage collection."""
    done = subprocess.run([str(PEER_PYTHON), "-c", _PEER_PATCHES], cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "ok"


def test_cli_skips_a_command_entry_that_cannot_load(monkeypatch, capsys):
    """The peer's environment has no scipy, which perf needs: the CLI still starts."""
    import importlib.metadata

    from torch_trt_ref import cli

    class Entry:
        def __init__(self, name, fails):
            self.name, self.fails = name, fails

        def load(self):
            if self.fails:
                raise ModuleNotFoundError("No module named 'scipy'")
            return lambda sub: sub.add_parser("fine")

    monkeypatch.setattr(importlib.metadata, "entry_points",
                        lambda group: [Entry("perf", True), Entry("zoo", False)])
    loaded = cli.registered_commands()
    assert len(loaded) == 1
    err = capsys.readouterr().err
    assert "'perf' commands are unavailable here" in err and "scipy" in err
