"""A program saved before the layering refactor (issue 22) still loads.

tests/data/old_layout_* were written by main's code of commit 27c530a (the module layout
before ``Engine`` moved to the runtime, the stitched module's pickling moved next to it and
the weight and output-rule modules were split): a conv -> relu -> sigmoid (PyTorch) -> conv
-> mean -> linear model with a dynamic batch (1..4), two engines around a PyTorch segment,
saved with ``torch_trt_ref.save`` and with ``torch.save`` (xz-compressed here: the plans
compress 30x). The pickles name classes and functions by their old modules; those names
stay importable, and the loaded modules reproduce the output saved with them bit for bit
(same plans, same reference executor)."""

from __future__ import annotations

import importlib
import lzma
import pickletools
import zipfile
from io import BytesIO
from pathlib import Path

import pytest
import torch

import torch_trt_ref

DATA = Path(__file__).parent / "data"

# every torch_trt_ref name the two old files pickle
OLD_NAMES = [
    "torch_trt_ref.build.Engine", "torch_trt_ref.conversion.shapes.TensorSpec",
    "torch_trt_ref.engine_cache._plan_from_tensor", "torch_trt_ref.report.CompileReport",
    "torch_trt_ref.report.EngineRecord", "torch_trt_ref.runtime.custom_op.OutputRule",
    "torch_trt_ref.runtime.custom_op._restore_handle",
    "torch_trt_ref.runtime.guard.InputDtypeGuard", "torch_trt_ref.runtime.module.EngineModule",
    "torch_trt_ref.runtime.snapshot.LayerRecord",
    "torch_trt_ref.runtime.snapshot.NetworkSnapshot",
    "torch_trt_ref.runtime.snapshot.TensorInfo", "torch_trt_ref.serialize._NodeRef",
    "torch_trt_ref.serialize._archive_ref", "torch_trt_ref.serialize._rebuild_partitioned",
    "torch_trt_ref.weights.Ref", "torch_trt_ref.weights.Root", "torch_trt_ref.weights.Step",
    "torch_trt_ref.weights.WeightProgram", "torch_trt_ref.weights._resolve",
]


def unpacked(tmp_path, name):
    path = tmp_path / name
    path.write_bytes(lzma.decompress((DATA / f"{name}.xz").read_bytes()))
    return path


@pytest.fixture(scope="module")
def io():
    return torch.load(DATA / "old_layout_io.pt")


@pytest.mark.parametrize("name", OLD_NAMES)
def test_old_pickled_names_resolve(name):
    module, _, attr = name.rpartition(".")
    assert hasattr(importlib.import_module(module), attr), name


def test_the_list_of_old_names_is_complete(tmp_path):
    """OLD_NAMES is read off the files: a name added there is tested above."""
    found = set()
    for name in ("old_layout_program.ttr", "old_layout_torch_save.pt"):
        with zipfile.ZipFile(unpacked(tmp_path, name)) as archive:
            for member in archive.namelist():
                data = archive.read(member)
                if member.endswith(".pt"):
                    inner = zipfile.ZipFile(BytesIO(data))
                    data = inner.read(next(n for n in inner.namelist() if n.endswith(".pkl")))
                elif not member.endswith(".pkl"):
                    continue
                ops = list(pickletools.genops(data))
                for i, (op, arg, _) in enumerate(ops):
                    if op.name == "STACK_GLOBAL":
                        arg = f"{ops[i - 2][1]} {ops[i - 1][1]}"
                    if op.name in ("GLOBAL", "STACK_GLOBAL") and arg.startswith("torch_trt_ref"):
                        found.add(arg.replace(" ", "."))
    assert found == set(OLD_NAMES)


def test_a_program_saved_with_torch_trt_ref_save_loads(tmp_path, io):
    loaded = torch_trt_ref.load(unpacked(tmp_path, "old_layout_program.ttr"))
    assert loaded.compile_report.counts == {"tensorrt": 2, "torch": 1}
    with torch.no_grad():
        assert torch.equal(loaded(io["input"]), io["output"])


def test_a_program_saved_with_torch_save_loads(tmp_path, io):
    loaded = torch.load(unpacked(tmp_path, "old_layout_torch_save.pt"), weights_only=False)
    with torch.no_grad():
        assert torch.equal(loaded(io["input"]), io["output"])
