"""Where serialized plans live: on disk, never as a second in-memory copy of the weights.

The builder streams each plan into a file (``build_serialized_network_to_stream``; a plan
of one stream chunk is built in memory and written at once, Note [Plan out of the
builder]), so a compile does not hold the plan bytes next to the model's weights. ``PlanFile`` keeps
an open descriptor to that file and reads the bytes only when the TensorRT executor
deserializes the engine. Without an engine cache the file is anonymous (unlinked at once,
freed with its ``PlanFile``); with one it is a cache entry.

``EngineCache`` (design D8) is a directory of entries keyed by ``engine_key``: a hash of
the network handed to the builder (layers, attributes, wiring, the shapes and dtypes of its
weights), the input profiles, the engine-affecting settings and the TensorRT version. The
key leaves out the values of the model's weights (it keeps those of converter constants,
which are structure): the same architecture with new weights hits, and the engine is refit
(``build.build_engine``). Writes are atomic (temporary file + rename), each entry has a
sidecar with its size, CRC-32 and the digest of the weights its plan holds, a corrupt
entry is reported, deleted and rebuilt, and the least recently used entries are evicted
beyond the size limit.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import warnings
import weakref
import zlib
from pathlib import Path
from typing import Any, Callable, Sequence

import torch

from ._trt import BACKEND, trt

log = logging.getLogger(__name__)

_CHUNK = 1 << 24
_BUILDING = ".building_"  # prefix of a plan still being written
_VERSION = 2  # 2: model weights left out of the key


class PlanFile:
    """A serialized plan on disk, held open so it outlives a cache eviction. The file is
    closed when the PlanFile is freed, or at interpreter exit at the latest. Pickling
    carries the plan bytes; unpickling writes them to an anonymous file."""

    def __init__(self, file, nbytes: int):
        self._file = file
        self.nbytes = nbytes
        self._close = weakref.finalize(self, file.close)

    def read(self) -> bytes:
        return os.pread(self._file.fileno(), self.nbytes, 0)

    def close(self) -> None:
        self._close()

    @classmethod
    def from_bytes(cls, plan: bytes) -> PlanFile:
        file = tempfile.TemporaryFile(prefix="torch_trt_ref_plan_")
        file.write(plan)
        file.flush()
        return cls(file, len(plan))

    # Note [Plan bytes as a tensor]: pickled as a uint8 tensor, not as bytes: torch.save
    # (pickle protocol 2) writes bytes as a latin-1 string, 1.5x their size in its UTF-8
    # form, but stores a tensor's storage as a raw record.
    def __reduce__(self):
        return (_plan_from_tensor, (torch.frombuffer(bytearray(self.read()), dtype=torch.uint8),))


def _plan_from_tensor(plan: torch.Tensor) -> PlanFile:
    return PlanFile.from_bytes(plan.numpy().tobytes())


class _FileWriter(trt.IStreamWriter):
    """TensorRT stream writer appending to a binary file, with a running CRC-32."""

    def __init__(self, file):
        trt.IStreamWriter.__init__(self)
        self.file, self.nbytes, self.crc = file, 0, 0

    def write(self, data) -> int:
        self.file.write(data)
        self.nbytes += len(data)
        self.crc = zlib.crc32(data, self.crc)
        return len(data)


# Note [Plan out of the builder]: ``build_serialized_network_to_stream`` hands the plan to the
# writer in chunks of 64 MiB (TensorRT-RTX 1.7), each copied by the Python binding into a
# ``bytes`` object. A plan of one chunk is thus copied whole at the builder's peak, and
# building into the builder's own memory (``build_serialized_network``), written out through
# a memoryview and freed, peaks lower (resnet18: 182 MiB above the pre-compile RSS against
# 201 MiB; mobilenet_v2 121 against 180). A larger plan is streamed: held whole it would
# raise the peak by its size (GPT-2 124M: 1,095 MiB against 750).
_STREAM_CHUNK = 64 << 20


def stream_plan(builder, net, config, file, weight_bytes: int | None = None
                ) -> _FileWriter | None:
    """Build ``net`` into ``file``; the writer (size, CRC) or None if the build failed.
    ``weight_bytes`` (the network's weights, about the plan's size) under one stream chunk:
    built in memory (Note [Plan out of the builder]); else, or unknown, streamed."""
    writer = _FileWriter(file)
    if weight_bytes is None or weight_bytes >= _STREAM_CHUNK:
        ok = builder.build_serialized_network_to_stream(net, config, writer)
        file.flush()
        return writer if ok and writer.nbytes else None
    plan = builder.build_serialized_network(net, config)
    if plan is None:
        return None
    with memoryview(plan) as view:
        for start in range(0, view.nbytes, _CHUNK):
            writer.write(view[start:start + _CHUNK])
    del plan
    file.flush()
    return writer if writer.nbytes else None


def build_to_anonymous_file(builder, net, config, weight_bytes: int | None = None
                            ) -> PlanFile | None:
    """Build into an unlinked temporary file (freed when the PlanFile is)."""
    file = tempfile.TemporaryFile(prefix="torch_trt_ref_plan_")
    writer = stream_plan(builder, net, config, file, weight_bytes)
    if writer is None:
        file.close()
        return None
    return PlanFile(file, writer.nbytes)


# -- keys -------------------------------------------------------------------------------
def _digest(tensor: torch.Tensor) -> str:
    data = tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy()
    return hashlib.blake2b(memoryview(data), digest_size=16).hexdigest()


def _canonical(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return {"tensor": list(value.shape), "dtype": str(value.dtype), "digest": _digest(value)}
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _canonical(v) for k, v in sorted(value.items())}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)


def _layer_attrs(layer, model_weights: set[tuple[str, str]]) -> Any:
    """A layer's attributes for the key: a model weight by shape and dtype only."""
    return {name: {"weight": list(value.shape), "dtype": str(value.dtype)}
            if (layer.name, name) in model_weights and isinstance(value, torch.Tensor)
            else _canonical(value) for name, value in sorted(layer.attrs.items())}


def engine_key(snapshot, inputs: Sequence[Any], settings_fields: dict[str, Any],
               model_weights: set[tuple[str, str]] = frozenset()) -> str | None:
    """The cache key of a network, or None when the snapshot cannot describe every layer
    (a layer kind without attributes read back would make different networks collide).
    The values of ``model_weights`` ((layer name, weight role) pairs) are left out."""
    if snapshot.unsupported_kinds():
        return None
    description = {
        "version": _VERSION, "backend": BACKEND, "trt": trt.__version__,
        "settings": _canonical(settings_fields),
        "inputs": [spec.to_json() for spec in inputs],
        "outputs": list(snapshot.outputs),
        "layers": [[layer.kind, layer.inputs,
                    [[t.name, list(t.shape), str(t.dtype)] for t in layer.outputs],
                    _layer_attrs(layer, model_weights)] for layer in snapshot.layers],
    }
    text = json.dumps(description, sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()


def weights_digest(snapshot, model_weights: set[tuple[str, str]]) -> str:
    """A digest of the values of ``model_weights``: equal digests, same weights."""
    digest = hashlib.blake2b(digest_size=16)
    for layer in snapshot.layers:
        for name, value in sorted(layer.attrs.items()):
            if (layer.name, name) in model_weights and isinstance(value, torch.Tensor):
                digest.update(f"{layer.name}/{name}:{_digest(value)};".encode())
    return digest.hexdigest()


# -- the cache ----------------------------------------------------------------------------
class EngineCache:
    """A directory of plans: ``<key>.plan`` plus ``<key>.json`` (size, CRC-32)."""

    def __init__(self, directory: str | os.PathLike, max_bytes: int):
        self.directory = Path(directory)
        self.max_bytes = max_bytes
        self.directory.mkdir(parents=True, exist_ok=True)

    def _paths(self, key: str) -> tuple[Path, Path]:
        return self.directory / f"{key}.plan", self.directory / f"{key}.json"

    def lookup(self, key: str) -> PlanFile | None:
        """The entry for ``key`` if present and intact; a corrupt entry is deleted with a
        warning (the caller rebuilds it)."""
        plan_path, meta_path = self._paths(key)
        if not plan_path.exists() and not meta_path.exists():
            return None
        problem = self._check(plan_path, meta_path)
        if problem is not None:
            warnings.warn(f"engine cache entry {key[:16]}… in {self.directory} is corrupt "
                          f"({problem}); deleting it and rebuilding the engine", stacklevel=3)
            self._remove(key)
            return None
        file = open(plan_path, "rb")
        os.utime(plan_path)  # most recently used
        return PlanFile(file, plan_path.stat().st_size)

    def _check(self, plan_path: Path, meta_path: Path) -> str | None:
        try:
            meta = json.loads(meta_path.read_text())
            expected_size, expected_crc = int(meta["nbytes"]), int(meta["crc32"])
        except (OSError, ValueError, KeyError, TypeError) as err:
            return f"unreadable metadata: {type(err).__name__}: {err}"
        try:
            size = plan_path.stat().st_size
        except OSError as err:
            return f"plan file missing: {err}"
        if size != expected_size:
            return f"plan has {size} bytes, metadata says {expected_size}"
        crc = 0
        with open(plan_path, "rb") as f:
            while chunk := f.read(_CHUNK):
                crc = zlib.crc32(chunk, crc)
        if crc != expected_crc:
            return f"CRC-32 {crc:08x} does not match {expected_crc:08x}"
        return None

    def entry_weights(self, key: str) -> str | None:
        """The weights digest recorded with the entry of ``key`` (None if unknown)."""
        try:
            return json.loads(self._paths(key)[1].read_text()).get("weights")
        except (OSError, ValueError, AttributeError):
            return None

    def build(self, key: str, build: Callable[[Any], Any],
              weights: str | None = None) -> PlanFile | None:
        """Run ``build(file)`` (it streams the plan into ``file`` and returns the writer or
        None) and store the result atomically under ``key``, with ``weights`` (the digest
        of the model weights the plan holds) in its sidecar."""
        plan_path, meta_path = self._paths(key)
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=_BUILDING, suffix=".plan")
        file = os.fdopen(fd, "w+b")
        try:
            writer = build(file)
        except BaseException:
            file.close()
            os.unlink(tmp)
            raise
        if writer is None:
            file.close()
            os.unlink(tmp)
            return None
        file.flush()
        os.fsync(file.fileno())
        meta = {"nbytes": writer.nbytes, "crc32": writer.crc, "backend": BACKEND,
                "trt": trt.__version__, "weights": weights}
        meta_tmp = meta_path.with_suffix(".json.tmp")
        meta_tmp.write_text(json.dumps(meta))
        os.replace(tmp, plan_path)
        os.replace(meta_tmp, meta_path)
        self.evict(keep=key)
        return PlanFile(file, writer.nbytes)

    def entries(self) -> list[tuple[str, int, float]]:
        """(key, plan bytes, last use) of every entry, oldest first."""
        out = []
        for path in self.directory.glob("*.plan"):
            if path.name.startswith(_BUILDING):  # another compile is still writing it
                continue
            try:
                stat = path.stat()
            except OSError:
                continue
            out.append((path.stem, stat.st_size, stat.st_mtime))
        return sorted(out, key=lambda e: e[2])

    def evict(self, keep: str | None = None) -> list[str]:
        """Delete least recently used entries until the cache fits ``max_bytes``."""
        entries = self.entries()
        total = sum(size for _, size, _ in entries)
        removed = []
        for key, size, _ in entries:
            if total <= self.max_bytes:
                break
            if key == keep:
                continue
            self._remove(key)
            total -= size
            removed.append(key)
        if removed:
            log.info("engine cache: evicted %d entries to stay under %d bytes",
                     len(removed), self.max_bytes)
        return removed

    def _remove(self, key: str) -> None:
        for path in self._paths(key):
            try:
                path.unlink()
            except FileNotFoundError:
                pass
