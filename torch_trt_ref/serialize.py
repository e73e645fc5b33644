"""Compiled programs that last: ``save`` / ``load`` of one file (layout in docs/deploy.md),
with the load-time checks. (The stitched module pickles itself: partitioning/stitch.py.)"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import sys
import types
import zipfile
from importlib import metadata
from io import BytesIO
from pathlib import Path
from typing import Any

import torch
from torch.fx import GraphModule

from ._trt import BACKEND, trt
from .engine_cache import PlanFile
from .errors import SerializationError
from .library_ops import library_ops

# programs saved before the stitched module's pickling moved to partitioning/stitch.py
# name these here
from .partitioning.stitch import (  # noqa: F401
    _NodeRef,
    _rebuild_partitioned,
    _rebuild_requiring,
    _require_ops,
)
from .runtime.by_size import BySize
from .runtime.custom_op import EngineHandle, runnable_executor
from .runtime.module import EngineModule

FORMAT = "torch_trt_ref.program"
FORMAT_VERSION = 1
MANIFEST, PROGRAM, REPORT = "manifest.json", "program.pt", "report.json"


# -- the file ------------------------------------------------------------------------------
def save(compiled: GraphModule, path: str | os.PathLike, plans: bool = True) -> Path:
    """Write ``compiled`` (a module ``torch_trt_ref.compile`` returned, or ``load``ed) to
    ``path`` as one file: the stitched program with its PyTorch segments, every engine
    (plan, network snapshot, input specs with their ranges, output rules), the compile
    report, and a manifest with the format version, the torch / TensorRT versions and a
    SHA-256 of every part. The file appears whole or not at all. ``plans=False`` leaves the
    TensorRT plans out (about half the file): its engines run on the reference executor
    wherever it is loaded, e.g. a GPU machine without TensorRT."""
    report = getattr(compiled, "compile_report", None)
    if not isinstance(compiled, (GraphModule, BySize)) or report is None:
        raise TypeError(f"torch_trt_ref.save takes a module returned by torch_trt_ref.compile "
                        f"or torch_trt_ref.load, got {type(compiled).__name__}")
    engines = {name: m for name, m in compiled.named_modules() if isinstance(m, EngineModule)}
    path = _save_path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
            writer = _Writer(archive)
            for name, module in engines.items():
                handle = module.handle
                writer.write(f"engines/{name}.plan", handle.engine.plan if plans else b"")
                writer.pickle(f"engines/{name}.pt", {"name": handle.name,
                                                    "executor": _executor(handle, plans),
                                                    "rules": handle.rules,
                                                    "engine": handle.engine},
                              {id(handle.engine.plan_file): ("plan", name)})
            writer.pickle(PROGRAM, compiled,
                          {id(m.handle): ("engine", name) for name, m in engines.items()})
            writer.write(REPORT, json.dumps(report.to_json(), indent=1, default=str).encode())
            manifest = _manifest(compiled, engines, report, writer.members, plans)
            archive.writestr(MANIFEST, json.dumps(manifest, indent=1, default=str))
        os.replace(tmp, path)
    except OSError as err:  # named by the user's path, not the temporary one
        tmp.unlink(missing_ok=True)
        raise type(err)(f"torch_trt_ref.save: cannot write {path}: "
                        f"{err.strerror or err}") from err
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def zip_holds(path: Any, member: str) -> bool:
    """Whether ``path`` is a zip file with ``member`` (anything else: False): how ``load``
    tells the wrappers' files (a decoder's, a mutable module's) from a program's."""
    if not isinstance(path, (str, os.PathLike)) or not os.path.isfile(path):
        return False
    try:
        with zipfile.ZipFile(path) as archive:
            return member in archive.namelist()
    except (zipfile.BadZipFile, OSError):
        return False


def _file_path(path: Any, verb: str, naming: str, instead) -> Path:
    """``save``'s or ``load``'s ``path`` as a Path: not a path is a TypeError, a folder an
    IsADirectoryError naming the path the user gave and what to give ``instead``."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"torch_trt_ref.{verb}: path must be a str or os.PathLike naming "
                        f"{naming}, got {type(path).__name__}")
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"torch_trt_ref.{verb}: {str(path)!r} is a folder; give "
                                f"{instead(path)}")
    return path


def _save_path(path: Any) -> Path:
    """``save``'s ``path``, checked before anything is written: a file in an existing folder
    (a folder, or a missing one, is an error naming the path the user gave)."""
    path = _file_path(path, "save", "the file to write", lambda p: (
        f"the path of the file to write in it, e.g. {str(p / 'model.ttrt')!r}"))
    if not path.parent.exists():
        raise FileNotFoundError(f"torch_trt_ref.save: {str(path)!r}: the folder "
                                f"{str(path.parent)!r} does not exist; create it first")
    if not path.parent.is_dir():
        raise NotADirectoryError(f"torch_trt_ref.save: {str(path)!r}: {str(path.parent)!r} is "
                                 "a file, not a folder")
    return path


def _executor(handle: EngineHandle, plans: bool) -> str:
    return handle.executor if plans else "reference"


def _manifest(compiled, engines: dict[str, EngineModule], report, members,
              plans: bool = True) -> dict[str, Any]:
    return {
        "format": FORMAT, "format_version": FORMAT_VERSION,
        "torch_trt_ref": _version("torch_trt_ref"), "torch": torch.__version__,
        "tensorrt": {"backend": BACKEND, "version": trt.__version__},
        "python": ".".join(map(str, sys.version_info[:3])),
        "engines": [{"name": name, "plan": f"engines/{name}.plan", "engine": f"engines/{name}.pt",
                     "executor": _executor(m.handle, plans), "plans": plans,
                     "layers": m.engine.layer_count,
                     "inputs": [s.to_json() for s in m.engine.inputs],
                     "outputs": [{"dtype": str(r.dtype).removeprefix("torch."),
                                  "shape": list(r.dims)} for r in m.handle.rules]}
                    for name, m in engines.items()],
        "torch_segments": [prefix + name for prefix, program in _programs(compiled)
                           for name, m in program.named_children()
                           if isinstance(m, GraphModule)],
        "settings": report.settings,
        "library_ops": library_ops(compiled),  # op -> the module that registers it
        "members": members,
    }


def _programs(compiled) -> list[tuple[str, GraphModule]]:
    """The stitched programs of ``compiled`` with their module-name prefixes: itself, or
    each branch of a module compiled per size (``BySize``)."""
    if isinstance(compiled, BySize):
        return [(f"branches.{i}.", b) for i, b in enumerate(compiled.branches)]
    return [("", compiled)]


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "unknown"


class _Hashing:
    """A write-only stream that counts and hashes what passes through it."""

    def __init__(self, stream):
        self.stream, self.nbytes, self.sha = stream, 0, hashlib.sha256()

    def write(self, data) -> int:
        self.stream.write(data)
        self.sha.update(data)
        self.nbytes += len(data)
        return len(data)

    def flush(self) -> None:
        self.stream.flush()


class _Writer:
    """Writes members into the archive, recording each one's size and SHA-256."""

    def __init__(self, archive: zipfile.ZipFile):
        self.archive = archive
        self.members: dict[str, dict[str, Any]] = {}

    def write(self, member: str, data: bytes) -> None:
        self.archive.writestr(member, data)
        self.members[member] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}

    def pickle(self, member: str, obj: Any, refs: dict[int, tuple[str, str]]) -> None:
        """``torch.save`` of ``obj``, where the objects in ``refs`` (by id) are written as
        references to other members (an engine, a plan) instead of their contents."""

        class Pickler(pickle.Pickler):
            def reducer_override(self, value):
                ref = refs.get(id(value))
                return NotImplemented if ref is None else (_archive_ref, ref)

        with self.archive.open(member, "w", force_zip64=True) as raw:
            stream = _Hashing(raw)
            try:
                torch.save(obj, stream, pickle_module=_pickle_module(Pickler=Pickler))
            except Exception as err:
                raise TypeError(f"torch_trt_ref.save: cannot write {member}: "
                                f"{type(err).__name__}: {err}") from err
        self.members[member] = {"bytes": stream.nbytes, "sha256": stream.sha.hexdigest()}


def _pickle_module(**classes) -> types.ModuleType:
    """The ``pickle`` module with our Pickler or Unpickler (torch.save's ``pickle_module``)."""
    module = types.ModuleType("torch_trt_ref_pickle")
    module.__dict__.update(vars(pickle), **classes)
    return module


def _archive_ref(kind: str, name: str):
    """Stands for a member of a program file inside another member's pickle; only
    ``load`` resolves it."""
    raise SerializationError(f"this pickle refers to the {kind} {name!r} of a torch_trt_ref "
                             "program file; load the file with torch_trt_ref.load")


def load(path: str | os.PathLike) -> GraphModule:
    """Read a file written by ``save``. Every part is checked against the manifest's
    SHA-256 before it is used; a damaged, truncated or newer file, or one missing an
    engine, is a ``SerializationError`` saying what is wrong. Plans built by another
    TensorRT cannot be deserialized: their engines run on the reference executor from
    their network snapshots (with a warning), or the load fails if it cannot run them."""
    path = _file_path(path, "load", "a file torch_trt_ref.save wrote",
                      lambda p: "the program file torch_trt_ref.save wrote")
    if not path.is_file():
        raise FileNotFoundError(f"torch_trt_ref.load: {path} does not exist or is not a file")
    with _Reader(path) as reader:
        built_by = (reader.manifest["tensorrt"]["backend"], reader.manifest["tensorrt"]["version"])
        handles = {}
        for entry in reader.manifest["engines"]:
            handles[entry["name"]] = reader.engine(entry, built_by)
        program = reader.unpickle(PROGRAM, {"engine": handles})
    if not isinstance(program, (GraphModule, BySize)):
        raise SerializationError(f"{path}: {PROGRAM} holds a {type(program).__name__}, not a "
                                 "compiled module")
    used = {name for name, m in program.named_modules() if isinstance(m, EngineModule)}
    unused = sorted(set(handles) - used)
    if unused:
        raise SerializationError(f"{path}: the manifest lists engines {unused} that the "
                                 "program does not run; the file was assembled from parts of "
                                 "different programs")
    return program


class _Reader:
    """An open program file whose manifest has been checked."""

    def __init__(self, path: Path):
        self.path = path
        try:
            self.archive = zipfile.ZipFile(path)
        except (zipfile.BadZipFile, OSError) as err:
            raise SerializationError(
                f"{path} is not a complete torch_trt_ref program file ({err}): it is truncated "
                "or damaged, or another kind of file. torch_trt_ref.load reads what "
                "torch_trt_ref.save wrote (a torch.export .pt2 file: torch.export.load; "
                "torch.save: torch.load)") from None
        self.manifest = self._manifest()

    def __enter__(self) -> _Reader:
        return self

    def __exit__(self, *exc) -> None:
        self.archive.close()

    def _manifest(self) -> dict[str, Any]:
        """The manifest, once its format and version are ones this code reads (checked
        before anything else, so a newer file is named as such) and the fields ``load``
        reads are there."""
        if MANIFEST not in self.archive.namelist():
            raise SerializationError(f"{self.path} has no {MANIFEST}: it is not a file "
                                     "written by torch_trt_ref.save (a torch.export .pt2 "
                                     "file: torch.export.load; torch.save: torch.load)")
        try:
            manifest = json.loads(self._bytes(MANIFEST))
            fmt, version = manifest.get("format"), manifest.get("format_version")
        except (ValueError, AttributeError) as err:
            raise SerializationError(f"{self.path}: {MANIFEST} is unreadable "
                                     f"({type(err).__name__}: {err})") from None
        if fmt != FORMAT:
            raise SerializationError(f"{self.path} holds {fmt!r}, not {FORMAT!r}")
        if not isinstance(version, int) or version > FORMAT_VERSION or version < 1:
            raise SerializationError(
                f"{self.path} has format version {version}, written by torch_trt_ref "
                f"{manifest.get('torch_trt_ref')}; this torch_trt_ref reads format versions 1 "
                f"to {FORMAT_VERSION}: load it with a newer torch_trt_ref")
        try:
            trt_info = manifest["tensorrt"]
            manifest["members"].get, trt_info["backend"], trt_info["version"]
            for entry in manifest["engines"]:
                entry["name"], entry["plan"], entry["engine"]
        except (KeyError, TypeError, AttributeError) as err:
            raise SerializationError(f"{self.path}: {MANIFEST} lacks a field "
                                     f"({type(err).__name__}: {err})") from None
        return manifest

    def _bytes(self, member: str) -> bytes:
        try:
            return self.archive.read(member)
        except KeyError:
            raise SerializationError(f"{self.path}: part {member} is missing") from None
        except (zipfile.BadZipFile, OSError, EOFError) as err:
            raise SerializationError(f"{self.path}: part {member} is corrupted ({err}); the "
                                     "file was damaged after it was saved") from None

    def read(self, member: str) -> bytes:
        """A member's bytes, checked against the manifest's size and SHA-256."""
        expected = self.manifest["members"].get(member)
        if expected is None:
            raise SerializationError(f"{self.path}: the manifest has no checksum for {member}")
        data = self._bytes(member)
        digest = hashlib.sha256(data).hexdigest()
        if len(data) != expected["bytes"] or digest != expected["sha256"]:
            raise SerializationError(
                f"{self.path}: part {member} is corrupted: {len(data)} bytes with SHA-256 "
                f"{digest[:16]}…, the manifest says {expected['bytes']} bytes with "
                f"{expected['sha256'][:16]}…; save the program again")
        return data

    def unpickle(self, member: str, refs: dict[str, dict[str, Any]]) -> Any:
        data = self.read(member)
        path = self.path

        def resolve(kind: str, name: str):
            try:
                return refs[kind][name]
            except KeyError:
                raise SerializationError(f"{path}: {member} needs the {kind} {name!r}, which "
                                         f"the file does not hold") from None

        class Unpickler(pickle.Unpickler):
            def find_class(self, module, name):
                if (module, name) == (__name__, "_archive_ref"):
                    return resolve
                return super().find_class(module, name)

        try:
            return torch.load(BytesIO(data), weights_only=False,
                              pickle_module=_pickle_module(Unpickler=Unpickler))
        except SerializationError as err:
            if str(err).startswith(str(path)):
                raise
            raise SerializationError(f"{path}: {err}") from None
        except Exception as err:
            raise SerializationError(
                f"{path}: {member} could not be unpickled ({type(err).__name__}: {err}); it was "
                f"written with torch {self.manifest.get('torch')} and torch_trt_ref "
                f"{self.manifest.get('torch_trt_ref')}, this is torch {torch.__version__} and "
                f"torch_trt_ref {_version('torch_trt_ref')}") from err

    def engine(self, entry: dict[str, Any], built_by: tuple[str, str]) -> EngineHandle:
        name = entry.get("name")
        missing = [m for m in (entry.get("plan"), entry.get("engine"))
                   if m not in self.archive.namelist()]
        if missing:
            raise SerializationError(f"{self.path}: engine {name!r} is missing ({missing} not "
                                     "in the file); a program file holds every engine it runs")
        plan = PlanFile.from_bytes(self.read(entry["plan"]))
        state = self.unpickle(entry["engine"], {"plan": {name: plan}})
        try:
            executor = runnable_executor(state["executor"], name, state["engine"], built_by)
        except RuntimeError as err:
            raise SerializationError(f"{self.path}: {err}") from None
        return EngineHandle(state["engine"], executor, state["name"], state["rules"])
