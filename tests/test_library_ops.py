"""A compiled program that calls a library's own ops (torch.library) loads in a fresh
process that has not imported the library: load imports the module that registers each op
(Note [Library ops in a saved program] in library_ops.py), or names the op and that module
when it cannot be imported."""

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch
from library_op_helper import UsesLibraryOps

import torch_trt_ref
from torch_trt_ref.library_ops import defining_module, library_ops

ROOT = Path(__file__).resolve().parent.parent

LOAD = """
import sys, torch, torch_trt_ref
assert "library_op_helper" not in sys.modules
x, expected = torch.load(sys.argv[1] + "/io.pt")
for load in (lambda: torch_trt_ref.load(sys.argv[1] + "/m.ttrt"),
             lambda: torch.load(sys.argv[1] + "/m.pt", weights_only=False)):
    try:
        out = load()(x)
    except Exception as err:
        print(type(err).__name__, err)
        continue
    print("equal" if torch.equal(out, expected) else "differs")
"""


def fresh(tmp_path, path_entries):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(str(p) for p in path_entries))
    run = subprocess.run([sys.executable, "-c", LOAD, str(tmp_path)], capture_output=True,
                         text=True, env=env, cwd=tmp_path, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    return run.stdout.strip().splitlines()


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    path = tmp_path_factory.mktemp("library_ops")
    model = UsesLibraryOps().eval()
    compiled = torch_trt_ref.compile(model, [torch.randn(2, 3)], min_block_size=1)
    x = torch.randn(2, 3)
    torch.save((x, compiled(x)), path / "io.pt")
    torch_trt_ref.save(compiled, path / "m.ttrt")
    torch.save(compiled, path / "m.pt")
    return path, compiled


def test_the_module_that_registers_each_op_is_recorded(saved):
    path, compiled = saved
    expected = {"ttrt_test_lib::scale_add": "library_op_helper",
                "ttrt_test_lib::twice": "library_op_helper"}
    assert library_ops(compiled) == expected
    with zipfile.ZipFile(path / "m.ttrt") as archive:
        assert json.loads(archive.read("manifest.json"))["library_ops"] == expected
    assert defining_module(torch.ops.aten.add.Tensor) is None


def test_a_fresh_process_imports_the_library_and_runs_the_program(saved):
    path, _ = saved
    assert fresh(path, [ROOT, ROOT / "tests"]) == ["equal", "equal"]


def test_without_the_library_the_error_names_the_op_and_its_module(saved):
    path, _ = saved
    lines = fresh(path, [ROOT])
    assert len(lines) == 2
    for line in lines:
        assert line.startswith("SerializationError")
        assert "ttrt_test_lib::" in line and "'library_op_helper'" in line
        assert "torch_trt_ref 0." not in line  # not the version list, which misleads
