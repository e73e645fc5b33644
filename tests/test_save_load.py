"""Compiled programs saved with ``torch_trt_ref.save`` and with ``torch.save`` and loaded in
a fresh process equal the compiled module (bit for bit: the same engines on the same
executor) and pass the float64 rule against eager, at the min, opt and max of their
dynamic ranges; pickle works; no plan file is left open at exit; and every kind of bad
file is a SerializationError that says what is wrong (docs/deploy.md)."""

from __future__ import annotations

import hashlib
import json
import pickle
import zipfile

import deploy_programs
import pytest
import torch
from deploy_programs import BUILDERS, program, same

import torch_trt_ref
from torch_trt_ref._trt import trt
from torch_trt_ref.runtime import custom_op
from torch_trt_ref.runtime.snapshot import NetworkSnapshot
from torch_trt_ref.serialize import FORMAT_VERSION, SerializationError

FORMATS = ("torch_trt_ref.save", "torch.save")


@pytest.fixture(scope="module")
def fresh():
    return deploy_programs.fresh()


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("name", list(BUILDERS))
def test_loaded_in_a_fresh_process_equals_the_compiled_module(fresh, name, fmt):
    results, _ = fresh
    p, loaded = program(name), results[name, fmt]
    deploy_programs.check_loaded_outputs(name, p, loaded["outputs"], "loaded")
    assert loaded["executors"] == torch_trt_ref.executors_used(p.compiled)
    assert as_json(loaded["report"]) == as_json(p.compiled.compile_report.to_json())


def as_json(value):
    return json.loads(json.dumps(value, default=str))


def test_the_programs_cover_engines_around_a_pytorch_segment():
    counts = program("conv_sigmoid_conv").compiled.compile_report.counts
    assert counts == {"tensorrt": 2, "torch": 1}
    assert not program("bert").compiled.compile_report.fallbacks


def test_no_plan_file_is_left_open_at_exit(fresh):
    _, stderr = fresh
    assert "ResourceWarning" not in stderr, stderr


def test_pickle_round_trip():
    p = program("conv_sigmoid_conv")
    loaded = pickle.loads(pickle.dumps(p.compiled))
    with torch.no_grad():
        for args, want in zip(p.inputs, p.compiled_outputs):
            assert same(loaded(*args), want)
    assert loaded.partition_result is None  # FX nodes of the lowered graph: not kept
    assert loaded.compile_report.partition == p.compiled.compile_report.partition
    assert loaded.code == p.compiled.code  # the graph and its calling convention


def test_unpickled_engines_whose_plans_cannot_run_here_use_their_snapshots(monkeypatch):
    """The TensorRT check lives in the engine's unpickling, so torch.load, pickle and
    torch.export.load apply it too: an engine for the TensorRT executor where none can run,
    and plans of another TensorRT version, run on the reference executor with a warning."""
    p = program("conv_sigmoid_conv")
    module = pickle.loads(pickle.dumps(p.compiled))
    module._run_on_tensorrt_0.executor = "tensorrt"  # as compiled on a machine with a GPU
    data = pickle.dumps(module)
    monkeypatch.setattr(custom_op, "tensorrt_unavailable_reason", lambda: "no GPU in this test")
    with pytest.warns(UserWarning, match=r"engine _run_on_tensorrt_0: TensorRT cannot run "
                                         r"here \(no GPU in this test\); it runs on the "
                                         r"reference executor"):
        loaded = pickle.loads(data)
    assert torch_trt_ref.executors_used(loaded)["_run_on_tensorrt_0"] == "reference"
    monkeypatch.setattr(trt, "__version__", "0.0.1")
    with pytest.warns(UserWarning, match=r"engine _run_on_tensorrt_\d: its plan was built by "
                                         r"\S+ \S+ and \S+ 0.0.1 cannot deserialize it"):
        loaded = pickle.loads(data)
    with torch.no_grad():
        for args, want in zip(p.inputs, p.compiled_outputs):
            assert same(loaded(*args), want)


def test_save_takes_only_compiled_modules(tmp_path):
    with pytest.raises(TypeError, match="takes a module returned by torch_trt_ref.compile"):
        torch_trt_ref.save(torch.nn.Linear(2, 2), tmp_path / "x.ttrt")
    assert not list(tmp_path.iterdir())


# -- bad files -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """conv_sigmoid_conv (two engines, one PyTorch segment) saved with torch_trt_ref.save."""
    path = tmp_path_factory.mktemp("bad") / "good.ttrt"
    torch_trt_ref.save(program("conv_sigmoid_conv").compiled, path)
    return path


def rewrite(src, dst, edit_manifest=None, replace=None, drop=(), update_checksums=True):
    """A copy of the program file ``src`` with parts replaced or dropped and the manifest
    edited; the manifest's checksums follow the new parts unless ``update_checksums`` is
    False."""
    with zipfile.ZipFile(src) as archive:
        parts = {n: archive.read(n) for n in archive.namelist()}
    manifest = json.loads(parts.pop("manifest.json"))
    for name in drop:
        del parts[name]
    for name, data in (replace or {}).items():
        parts[name] = data
        if update_checksums:
            manifest["members"][name] = {"bytes": len(data),
                                         "sha256": hashlib.sha256(data).hexdigest()}
    if edit_manifest:
        edit_manifest(manifest)
    with zipfile.ZipFile(dst, "w") as archive:
        for name, data in parts.items():
            archive.writestr(name, data)
        archive.writestr("manifest.json", json.dumps(manifest))
    return dst


def test_a_truncated_file(saved, tmp_path):
    data = saved.read_bytes()
    bad = tmp_path / "truncated.ttrt"
    bad.write_bytes(data[: len(data) // 2])
    with pytest.raises(SerializationError, match="truncated.ttrt is not a complete "
                                                 "torch_trt_ref program file"):
        torch_trt_ref.load(bad)


def test_a_flipped_byte_in_a_plan(saved, tmp_path):
    data = bytearray(saved.read_bytes())
    with zipfile.ZipFile(saved) as archive:
        info = archive.getinfo("engines/_run_on_tensorrt_2.plan")
    # the part's data follows its 30-byte local header, its name and its extra field
    header = data[info.header_offset: info.header_offset + 30]
    start = info.header_offset + 30 + int.from_bytes(header[26:28], "little") + \
        int.from_bytes(header[28:30], "little")
    data[start + info.file_size // 2] ^= 0xFF
    bad = tmp_path / "flipped.ttrt"
    bad.write_bytes(bytes(data))
    with pytest.raises(SerializationError, match=r"flipped.ttrt: part "
                                                 r"engines/_run_on_tensorrt_2.plan is corrupted"):
        torch_trt_ref.load(bad)


def test_a_part_that_does_not_match_its_checksum(saved, tmp_path):
    bad = rewrite(saved, tmp_path / "swapped.ttrt",
                  replace={"engines/_run_on_tensorrt_0.plan": b"another plan"},
                  update_checksums=False)
    with pytest.raises(SerializationError, match=r"part engines/_run_on_tensorrt_0.plan is "
                                                 r"corrupted: 12 bytes with SHA-256 .* the "
                                                 r"manifest says"):
        torch_trt_ref.load(bad)


def test_a_newer_format_version(saved, tmp_path):
    bad = rewrite(saved, tmp_path / "newer.ttrt",
                  edit_manifest=lambda m: m.update(format_version=FORMAT_VERSION + 1))
    with pytest.raises(SerializationError, match=f"format version {FORMAT_VERSION + 1}.*reads "
                                                 f"format versions 1 to {FORMAT_VERSION}: load "
                                                 "it with a newer torch_trt_ref"):
        torch_trt_ref.load(bad)


def test_a_missing_engine(saved, tmp_path):
    bad = rewrite(saved, tmp_path / "missing.ttrt", drop=["engines/_run_on_tensorrt_2.plan"])
    with pytest.raises(SerializationError, match=r"engine '_run_on_tensorrt_2' is missing "
                                                 r"\(\['engines/_run_on_tensorrt_2.plan'\]"):
        torch_trt_ref.load(bad)

    def forget_engine(manifest):
        manifest["engines"] = [e for e in manifest["engines"] if e["name"] != "_run_on_tensorrt_2"]

    bad = rewrite(saved, tmp_path / "unlisted.ttrt", edit_manifest=forget_engine,
                  drop=["engines/_run_on_tensorrt_2.plan", "engines/_run_on_tensorrt_2.pt"])
    with pytest.raises(SerializationError, match="program.pt needs the engine "
                                                 "'_run_on_tensorrt_2', which the file does "
                                                 "not hold"):
        torch_trt_ref.load(bad)


def another_tensorrt(manifest):
    manifest["tensorrt"]["version"] = "0.0.1"


def test_plans_of_another_tensorrt_run_from_their_snapshots(saved, tmp_path):
    """Plans another TensorRT built cannot be deserialized: the engines run on the
    reference executor from their snapshots alone (the plans here are not even plans)."""
    bad = rewrite(saved, tmp_path / "old_trt.ttrt", edit_manifest=another_tensorrt,
                  replace={f"engines/_run_on_tensorrt_{i}.plan": b"not a plan" for i in (0, 2)})
    with pytest.warns(UserWarning, match=r"engine _run_on_tensorrt_\d: its plan was built by "
                                         r"\S+ 0.0.1 and \S+ \S+ cannot deserialize it; it "
                                         r"runs on the reference executor"):
        loaded = torch_trt_ref.load(bad)
    p = program("conv_sigmoid_conv")
    assert set(torch_trt_ref.executors_used(loaded).values()) == {"reference"}
    with torch.no_grad():
        for args, want in zip(p.inputs, p.compiled_outputs):
            assert same(loaded(*args), want)


def test_plans_of_another_tensorrt_and_a_snapshot_the_reference_cannot_run(
        saved, tmp_path, monkeypatch):
    bad = rewrite(saved, tmp_path / "old_trt.ttrt", edit_manifest=another_tensorrt)
    monkeypatch.setattr(NetworkSnapshot, "unsupported_kinds", lambda self: ["PLUGIN_V3"])
    with pytest.raises(SerializationError, match=r"old_trt.ttrt: engine _run_on_tensorrt_0 "
                                                 r"cannot run here: its plan was built by .* "
                                                 r"layer kinds \['PLUGIN_V3'\]"):
        torch_trt_ref.load(bad)


def test_files_that_are_not_program_files(saved, tmp_path):
    torch.save({"x": torch.ones(2)}, tmp_path / "weights.pt")  # a zip archive too
    with pytest.raises(SerializationError, match="weights.pt has no manifest.json: it is not "
                                                 "a file written by torch_trt_ref.save"):
        torch_trt_ref.load(tmp_path / "weights.pt")
    (tmp_path / "text.ttrt").write_text("hello")
    with pytest.raises(SerializationError, match="text.ttrt is not a complete torch_trt_ref "
                                                 "program file"):
        torch_trt_ref.load(tmp_path / "text.ttrt")
    with pytest.raises(FileNotFoundError, match="nothing.ttrt does not exist"):
        torch_trt_ref.load(tmp_path / "nothing.ttrt")


# -- path mistakes (issue 36 item 5) ---------------------------------------------------------
@pytest.fixture(scope="module")
def tiny():
    return torch_trt_ref.compile(torch.nn.Linear(4, 2).eval(), (torch.randn(1, 4),),
                                 min_block_size=1)


def test_save_path_mistakes_name_the_path_given(tiny, tmp_path):
    """Each is a clear error naming the user's path (never the temporary file's name), and
    nothing is left behind."""
    folder = tmp_path / "models"
    folder.mkdir()
    (tmp_path / "a_file").write_text("")
    cases = [
        (folder, IsADirectoryError, rf"torch_trt_ref.save: '{folder}' is a folder; give the "
                                    rf"path of the file to write in it, e.g. "
                                    rf"'{folder}/model.ttrt'"),
        (tmp_path / "missing" / "m.ttrt", FileNotFoundError,
         rf"torch_trt_ref.save: '{tmp_path}/missing/m.ttrt': the folder '{tmp_path}/missing' "
         r"does not exist; create it first"),
        (tmp_path / "a_file" / "m.ttrt", NotADirectoryError,
         rf"'{tmp_path}/a_file' is a file, not a folder"),
        (3, TypeError, r"torch_trt_ref.save: path must be a str or os.PathLike naming the file "
                       r"to write, got int"),
    ]
    for path, kind, match in cases:
        with pytest.raises(kind, match=match) as info:
            torch_trt_ref.save(tiny, path)
        assert ".partial" not in str(info.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file", "models"]
    assert not list(folder.iterdir())


def test_load_path_mistakes(tiny, tmp_path):
    with pytest.raises(IsADirectoryError, match=rf"torch_trt_ref.load: '{tmp_path}' is a "
                       r"folder; give the program file torch_trt_ref.save wrote"):
        torch_trt_ref.load(tmp_path)
    with pytest.raises(TypeError, match=r"torch_trt_ref.load: path must be a str or "
                       r"os.PathLike .*, got Linear"):
        torch_trt_ref.load(torch.nn.Linear(1, 1))
    x = torch.randn(1, 4)
    torch.export.save(torch.export.export(torch.nn.Linear(4, 2), (x,)), tmp_path / "m.pt2")
    with pytest.raises(SerializationError, match=r"m.pt2 has no manifest.json: it is not a "
                       r"file written by torch_trt_ref.save \(a torch.export .pt2 file: "
                       r"torch.export.load; torch.save: torch.load\)"):
        torch_trt_ref.load(tmp_path / "m.pt2")
    loaded = torch_trt_ref.load(torch_trt_ref.save(tiny, str(tmp_path / "ok.ttrt")))
    torch.testing.assert_close(loaded(x), tiny(x))  # a str path works as a Path does
