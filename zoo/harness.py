"""The sweep: run each cell in a fresh subprocess (so peak RSS is the compile's own, and a
crash or hang costs one cell), with a per-cell timeout, appending one JSON line per cell."""

from __future__ import annotations

import json
import os
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


def _failed(cell: Cell, status: str, kind: str, message: str) -> dict[str, Any]:
    return {"schema_version": SCHEMA_VERSION, "cell": cell.to_json(), "status": status,
            "error": {"stage": "subprocess", "type": kind, "message": message[-4000:]},
            "env": environment()}


def run_in_subprocess(cell: Cell, timeout: float = DEFAULT_TIMEOUT,
                      measure: dict[str, Any] | None = None) -> dict[str, Any]:
    """Run ``python -m zoo.cell`` for one cell; a timeout or a crash becomes a record with
    status "timeout" / "crashed" instead of an exception."""
    measure = measure or {}
    with tempfile.TemporaryDirectory(prefix="zoo-cell-") as tmp:
        out = os.path.join(tmp, "record.json")
        cmd = [sys.executable, "-m", "zoo.cell", "--cell", json.dumps(cell.to_json()),
               "--out", out]
        for flag in ("warmup", "runs", "max_seconds"):
            if flag in measure:
                cmd += [f"--{flag.replace('_', '-')}", str(measure[flag])]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            [str(REPO_ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p])}
        try:
            proc = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                                  timeout=timeout)
        except subprocess.TimeoutExpired:
            return _failed(cell, "timeout", "TimeoutExpired",
                           f"cell did not finish within {timeout:.0f} s")
        if not os.path.exists(out):
            return _failed(cell, "crashed", f"exit code {proc.returncode}",
                           proc.stderr or proc.stdout or "no output")
        with open(out) as f:
            return json.load(f)


def run_in_process(cell: Cell, timeout: float = DEFAULT_TIMEOUT,
                   measure: dict[str, Any] | None = None) -> dict[str, Any]:
    """Same record, measured in this process (for tests and debugging: no isolation, the
    timeout is not enforced and peak RSS includes earlier cells' leftovers)."""
    from .cell import run_cell

    return run_cell(cell, **(measure or {}))


def sweep(cells: Sequence[Cell], out: str | os.PathLike, *, timeout: float = DEFAULT_TIMEOUT,
          isolate: bool = True, measure: dict[str, Any] | None = None, progress: bool = True,
          on_record: Callable[[dict], None] | None = None) -> list[dict[str, Any]]:
    """Run ``cells`` in order, appending each record to ``out`` as soon as it is measured.
    Records of one sweep share a ``run_id``; a failing cell never stops the sweep."""
    run = run_in_subprocess if isolate else run_in_process
    run_id = f"{datetime.now(timezone.utc):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:6]}"
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    records = []
    bar = _progress(cells, progress)
    for cell in bar:
        if hasattr(bar, "set_postfix_str"):
            bar.set_postfix_str(cell.key)
        start = time.perf_counter()
        record = run(cell, timeout, measure)
        record["run_id"] = run_id
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
