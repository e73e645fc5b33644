"""The sweep: run each cell in a fresh process (so peak RSS is the compile's own, and a crash
or hang costs one cell), with a per-cell timeout, appending one JSON line per cell.

Isolation "subprocess" (the default) starts ``python -m zoo.cell`` per cell: a fresh
interpreter, as a user's script would be, at the price of ~5-10 s of imports per cell.
"fork" forks each cell from a forkserver that has already imported torch, transformers and
torch_trt_ref: much faster sweeps, but a forked cell's compile runs ~0.5-1 s slower (pages
shared copy-on-write with the forkserver are copied as the compile touches their objects),
so its compile times are not comparable with the anchor. "none" runs in-process."""

from __future__ import annotations

import json
import multiprocessing
import os
import platform
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Sequence

from .matrix import Cell
from .schema import SCHEMA_VERSION, environment, write_record

DEFAULT_TIMEOUT = 900.0
REPO_ROOT = Path(__file__).resolve().parent.parent


def failed_record(cell: Cell, status: str, kind: str, message: str) -> dict[str, Any]:
    """The record of a cell whose process crashed or timed out (the environment is the
    driver's, which started it)."""
    return {"schema_version": SCHEMA_VERSION, "cell": cell.to_json(), "status": status,
            "error": {"stage": "subprocess", "type": kind, "message": message[-4000:]},
            "env": {**environment(), "runner": "local", "node": platform.node(), "pid": None}}


def new_run_id() -> str:
    """The ``run_id`` shared by the records of one sweep."""
    return f"{datetime.now(timezone.utc):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:6]}"


def worker_pythonpath() -> str:
    """``PYTHONPATH`` for a cell's worker process (a subprocess here or a Ray worker): the
    project root first, so the worker imports this checkout, then the driver's own."""
    return os.pathsep.join([str(REPO_ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p])


def run_in_subprocess(cell: Cell, timeout: float = DEFAULT_TIMEOUT,
                      measure: dict[str, Any] | None = None,
                      python: str | None = None) -> dict[str, Any]:
    """Run ``python -m zoo.cell`` for one cell (with ``python``, default this interpreter);
    a timeout or a crash becomes a record with status "timeout" / "crashed" instead of an
    exception."""
    measure = measure or {}
    with tempfile.TemporaryDirectory(prefix="zoo-cell-") as tmp:
        out = os.path.join(tmp, "record.json")
        cmd = [python or sys.executable, "-m", "zoo.cell", "--cell", json.dumps(cell.to_json()),
               "--out", out]
        for flag in ("warmup", "runs", "max_seconds"):
            if flag in measure:
                cmd += [f"--{flag.replace('_', '-')}", str(measure[flag])]
        env = {**os.environ, "PYTHONPATH": worker_pythonpath()}
        try:
            proc = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                                  timeout=timeout)
        except subprocess.TimeoutExpired:
            return failed_record(cell, "timeout", "TimeoutExpired",
                           f"cell did not finish within {timeout:.0f} s")
        if not os.path.exists(out):
            return failed_record(cell, "crashed", f"exit code {proc.returncode}",
                           proc.stderr or proc.stdout or "no output")
        with open(out) as f:
            return json.load(f)


PRELOAD = ["torch", "torchvision", "transformers", "torch_trt_ref", "zoo.cell",
           "zoo.forkserver_init"]
_FORKSERVER: list = []


def _forkserver():
    if not _FORKSERVER:
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(PRELOAD)
        _FORKSERVER.append(ctx)
    return _FORKSERVER[0]


def run_forked(cell: Cell, timeout: float = DEFAULT_TIMEOUT,
               measure: dict[str, Any] | None = None) -> dict[str, Any]:
    """Run one cell in a process forked from the preloaded forkserver; its output goes to a
    log file whose tail becomes the error message if it crashes."""
    from .cell import run_to_file

    with tempfile.TemporaryDirectory(prefix="zoo-cell-") as tmp:
        out, log = os.path.join(tmp, "record.json"), os.path.join(tmp, "log.txt")
        proc = _forkserver().Process(target=run_to_file,
                                     args=(cell.to_json(), out, measure or {}, log))
        proc.start()
        proc.join(timeout)
        if proc.is_alive():
            proc.kill()
            proc.join()
            return failed_record(cell, "timeout", "TimeoutExpired",
                           f"cell did not finish within {timeout:.0f} s")
        if not os.path.exists(out):
            tail = Path(log).read_text()[-4000:] if os.path.exists(log) else ""
            return failed_record(cell, "crashed", f"exit code {proc.exitcode}", tail or "no output")
        with open(out) as f:
            return json.load(f)


def run_in_process(cell: Cell, timeout: float = DEFAULT_TIMEOUT,
                   measure: dict[str, Any] | None = None) -> dict[str, Any]:
    """Same record, measured in this process (for tests and debugging: no isolation, the
    timeout is not enforced and peak RSS includes earlier cells' leftovers)."""
    from .cell import run_cell

    return run_cell(cell, **(measure or {}))


RUNNERS = {"fork": run_forked, "subprocess": run_in_subprocess, "none": run_in_process}


def sweep(cells: Sequence[Cell], out: str | os.PathLike, *, timeout: float = DEFAULT_TIMEOUT,
          isolation: str = "subprocess", measure: dict[str, Any] | None = None,
          progress: bool = True,
          on_record: Callable[[dict], None] | None = None) -> list[dict[str, Any]]:
    """Run ``cells`` in order, appending each record to ``out`` as soon as it is measured.
    Records of one sweep share a ``run_id``; a failing cell never stops the sweep."""
    run = RUNNERS[isolation]
    run_id = new_run_id()
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    records = []
    bar = _progress(cells, progress)
    for cell in bar:
        if hasattr(bar, "set_postfix_str"):
            bar.set_postfix_str(cell.key)
        start = time.perf_counter()
        record = run(cell, timeout, measure)
        record["run_id"] = run_id
        record["isolation"] = isolation
        record["timestamp"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
        record["wall_seconds"] = time.perf_counter() - start
        write_record(out, record)
        records.append(record)
        if on_record is not None:
            on_record(record)
    return records


def _progress(cells: Sequence[Cell], enabled: bool):
    if not enabled:
        return cells
    from tqdm import tqdm

    return tqdm(cells, desc="zoo", unit="cell", dynamic_ncols=True, file=sys.stderr)


class _NoBar:
    def update(self, n: int = 1) -> None:
        pass

    def close(self) -> None:
        pass


def progress_bar(total: int, enabled: bool):
    """A tqdm bar over ``total`` cells advanced by ``update()`` as results arrive, in any
    order (a no-op without ``enabled``)."""
    if not enabled:
        return _NoBar()
    from tqdm import tqdm

    return tqdm(total=total, desc="zoo", unit="cell", dynamic_ncols=True, file=sys.stderr)
