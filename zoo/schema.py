"""The zoo's JSON-lines record format: ``SCHEMA_VERSION``, the environment stamped on
each record (versions, machine) and reading/writing records."""

from __future__ import annotations

import json
import os
import platform
import subprocess
from pathlib import Path
from typing import Any, Iterable, Iterator

# 2: ``accuracy`` judged by the float64 rule (compiled_rmse, eager_rmse, ratio, allowed,
# passed) instead of ``within_tolerance``. Version 1 records are read and upgraded.
SCHEMA_VERSION = 2
READABLE_VERSIONS = (1, 2)


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _git_commit() -> str | None:
    root = Path(__file__).resolve().parent.parent
    try:
        sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, text=True,
                             capture_output=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return sha or None


def environment() -> dict[str, Any]:
    """Versions of everything that changes the numbers, and the machine they ran on."""
    import psutil
    import torch

    import torch_trt_ref
    from torch_trt_ref._trt import trt

    def version(module: str) -> str | None:
        try:
            return __import__(module).__version__
        except Exception:  # an optional package that is absent or broken
            return None

    cuda = torch.cuda.is_available()
    return {
        "torch": torch.__version__, "tensorrt_backend": torch_trt_ref.TRT_BACKEND,
        "tensorrt": trt.__version__, "torchvision": version("torchvision"),
        "transformers": version("transformers"), "python": platform.python_version(),
        "platform": platform.platform(), "cpu": cpu_model(),
        "cpu_count": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
        else os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "memory_bytes": psutil.virtual_memory().total,
        "gpu": torch.cuda.get_device_name(0) if cuda else None,
        "git_commit": _git_commit(),
    }


def write_record(path: str | os.PathLike, record: dict[str, Any]) -> None:
    """Append one record as a JSON line (flushed, so a killed sweep keeps what it did)."""
    with open(path, "a") as f:
        f.write(json.dumps(record, sort_keys=True, default=str) + "\n")
        f.flush()


def read_records(paths: str | os.PathLike | Iterable[str | os.PathLike]) -> list[dict]:
    """All records of one or more JSON-lines files, checking the schema version."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    return [r for p in paths for r in _read_one(Path(p))]


def _read_one(path: Path) -> Iterator[dict]:
    if not path.is_file():
        raise ValueError(f"{path}: no such file; expected a JSON-lines file of zoo records "
                         "(written by `torch-trt-ref zoo run --out FILE`)")
    for lineno, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}:{lineno}: not a JSON record ({err.msg}); expected the "
                             "JSON-lines output of `torch-trt-ref zoo run`") from None
        if not isinstance(record, dict):
            raise ValueError(f"{path}:{lineno}: a JSON {type(record).__name__}, not a zoo "
                             "record; expected the JSON-lines output of `torch-trt-ref zoo run`")
        version = record.get("schema_version")
        if version not in READABLE_VERSIONS:
            raise ValueError(f"{path}:{lineno}: schema_version {version!r}; this zoo reads "
                             f"versions {', '.join(map(str, READABLE_VERSIONS))}")
        yield upgrade(record)


def upgrade(record: dict) -> dict:
    """A version-1 record in version 2's terms: its accuracy verdict was the max abs
    tolerance (``within_tolerance``), which becomes ``passed`` with ``rule`` "tolerance"."""
    acc = record.get("accuracy")
    if record.get("schema_version") == 1 and acc and "passed" not in acc:
        acc.update(passed=acc.get("within_tolerance"), rule="tolerance",
                   allowed=acc.get("tolerance"))
    return record
