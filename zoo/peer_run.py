"""``torch-trt-ref zoo run --backend torch_tensorrt``: every selected zoo model compiled by
Torch-TensorRT itself (issue 41, DESIGN D16) beside our own compile of the same cell, in one
report. Run it in the peer's environment (``../shared/peer/setup.sh``) with this checkout on
PYTHONPATH.

The peer's side is ``torch.export`` of the model, then ``torch_tensorrt.dynamo.compile``
with its defaults (min_block_size 5, its fast partitioner; fp16 through its documented
``enable_autocast`` with ``autocast_low_precision_type=torch.float16``, since 2.13 builds
strongly typed networks only): its lowering, support check, partitioner and converters. No
engine is built (that needs a GPU): each network its converters built is read back and run
on our reference executor (``conformance/peer.py``), the parts it leaves to PyTorch run
eagerly on the CPU, and the result is judged by the zoo's float64 rule, as our cells are.
Our side is the zoo's own cell (``python -m zoo.cell``, strategy ``fast``: engines built by
the TensorRT-RTX builder) run by ``ours_python``, an interpreter of this project's own
environment: our compile needs torch >= 2.14, the peer's environment has torch 2.13.
Quantized and dynamic cells are not run through the peer.

Import only in the peer's environment (``conformance.peer`` patches Torch-TensorRT on
import); ``zoo.cli`` imports this module only for ``--backend torch_tensorrt``."""

from __future__ import annotations

import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import torch

from conformance.peer import VERSION, compile_program, snapshots, support, torch_segments
from torch_trt_ref.settings import PRECISION_DTYPES

from .cell import _accuracy
from .harness import run_in_subprocess
from .matrix import Cell
from .registry import QUICK, get
from .report import accuracy_cell, table

PRECISIONS = ("fp32", "fp16")
# Ours is measured for its partitions, layers and accuracy: a short latency run only.
OURS_MEASURE = {"warmup": 0, "runs": 1, "max_seconds": 1.0}


def peer_cells(models: list[str] | None, precisions: list[str] | None) -> list[Cell]:
    """(model, fast, precision) cells: the quick models (or ``models``) x fp32/fp16."""
    bad = [p for p in precisions or () if p not in PRECISIONS]
    if bad:
        raise ValueError(f"--precisions {' '.join(bad)}: the peer backend runs "
                         f"{', '.join(PRECISIONS)} only (quantized cells need modelopt, "
                         "which the peer's environment lacks)")
    return [Cell(m, "fast", p) for m in (models or QUICK) for p in (precisions or PRECISIONS)]


def _error(stage: str, err: BaseException) -> dict[str, Any]:
    return {"stage": stage, "type": type(err).__name__,
            "message": str(err).strip()[:2000],
            "traceback": traceback.format_exc()[-3000:]}


def run_peer_cell(cell: Cell) -> dict[str, Any]:
    """The record of one cell as Torch-TensorRT compiles it: ``partition`` (TensorRT
    subgraphs, PyTorch segments), ``ops`` (the peer's support count), ``engines.layers``
    (TensorRT layers in its networks) and ``accuracy`` (the float64 rule)."""
    record: dict[str, Any] = {"backend": "torch_tensorrt", "peer": VERSION,
                              "cell": cell.to_json(), "status": "ok", "error": None}
    stage = "build_model"
    try:
        entry = get(cell.model)
        model = entry.factory()
        args, kwargs = entry.inputs()
        stage = "eager"
        with torch.no_grad():
            reference = model(*args, **kwargs)
        stage = "export"
        ep = torch.export.export(model, tuple(args), dict(kwargs), strict=False)
        stage = "compile"
        settings: dict[str, Any] = {"min_block_size": entry.compile_settings.get(
            "min_block_size", 5)}
        if cell.precision != "fp32":
            settings.update(enable_autocast=True,
                            autocast_low_precision_type=PRECISION_DTYPES[cell.precision])
        start = time.perf_counter()
        compiled = compile_program(ep, list(args), dict(kwargs), whole_graph=False, **settings)
        record["compile_seconds"] = time.perf_counter() - start
        nets = snapshots(compiled)
        supported, total = support() or (0, 0)
        record["partition"] = {"engines": len(nets), "torch_segments": torch_segments(compiled)}
        record["ops"] = {"supported": supported, "total": total}
        record["engines"] = {"count": len(nets), "layers": sum(len(s.layers) for s in nets)}
        stage = "run"
        with torch.no_grad():
            result = compiled(*args, **kwargs)
        stage = "accuracy"
        record["accuracy"] = _accuracy(model, args, kwargs, reference, result,
                                       PRECISION_DTYPES[cell.precision],
                                       entry.tolerance(cell.precision))
    except Exception as err:  # a failing cell is data, as in the zoo's own sweep
        record["status"] = "error"
        record["error"] = _error(stage, err)
    return record


def _partitions(r: dict) -> str:
    p = r.get("partition")
    return "-" if p is None else f"{p['engines']} / {p['torch_segments']}"


def _layers(r: dict) -> str:
    return str(r["engines"]["layers"]) if r.get("engines") else "-"


def _accuracy_text(r: dict) -> str:
    if r.get("accuracy"):
        return accuracy_cell(r["accuracy"])
    err = r.get("error") or {}
    first = (err.get("message") or "").splitlines()[:1]
    text = f"{r['status']} at {err.get('stage')}: {err.get('type')}"
    return text + (f": {first[0][:120]}" if first else "")


def side_by_side(pairs: list[tuple[dict, dict]]) -> str:
    """Markdown: per cell, our partitions (TensorRT engines / PyTorch segments), layers and
    accuracy beside the peer's."""
    header = ["model", "precision", "ours: engines / torch segments", "ours: layers",
              "ours: RMSE vs fp64 compiled / eager (ratio)", "peer: TRT subgraphs / torch "
              "segments", "peer: layers", "peer: ops supported/total",
              "peer: RMSE vs fp64 compiled / eager (ratio)"]
    rows = []
    for ours, peer in pairs:
        ops = peer.get("ops")
        rows.append([ours["cell"]["model"], ours["cell"]["precision"], _partitions(ours),
                     _layers(ours), _accuracy_text(ours), _partitions(peer), _layers(peer),
                     f"{ops['supported']}/{ops['total']}" if ops else "-",
                     _accuracy_text(peer)])
    return "\n".join(table(header, rows))


def ours_python(given: str | None) -> str:
    """The interpreter that runs our side: ``given`` (``--ours-python``), else
    $TORCH_TRT_REF_PYTHON; it must exist."""
    import os

    python = given or os.environ.get("TORCH_TRT_REF_PYTHON")
    if not python:
        raise ValueError("--backend torch_tensorrt needs --ours-python (or "
                         "$TORCH_TRT_REF_PYTHON): the python of this project's environment, "
                         "which runs our side of each cell (our compile needs torch >= 2.14; "
                         "the peer's environment has torch 2.13)")
    if not Path(python).exists():
        raise ValueError(f"--ours-python {python}: no such file; expected the python of this "
                         "project's environment, e.g. .venv/bin/python")
    return python


def run_side_by_side(cells: list[Cell], out: Path, python: str,
                     progress: bool = True) -> list[tuple]:
    """Each cell through ours (``python -m zoo.cell`` run by ``python``), then through the
    peer in this process; both records are appended to ``out`` (JSON lines) as they are
    measured and the table is written next to it (``.md``)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("")
    pairs = []
    for k, cell in enumerate(cells, 1):
        start = time.perf_counter()
        ours = {"backend": "torch_trt_ref", **run_in_subprocess(cell, measure=OURS_MEASURE,
                                                                 python=python)}
        peer = run_peer_cell(cell)
        with out.open("a") as f:
            f.writelines(json.dumps(r, default=str) + "\n" for r in (ours, peer))
        pairs.append((ours, peer))
        if progress:
            print(f"zoo peer: {k}/{len(cells)} {cell.key}: ours {ours['status']}, peer "
                  f"{peer['status']} ({time.perf_counter() - start:.0f} s)", file=sys.stderr)
    text = side_by_side(pairs)
    out.with_suffix(".md").write_text(text + "\n")
    return pairs
