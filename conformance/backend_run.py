"""What ``python -m conformance --backend torch_tensorrt`` runs (``main``): every
conformance cell (our cases in every dtype, static and dynamic, and the OpInfo samples:
their first samples by default, ``--opinfo manifest`` for all) compiled by Torch-TensorRT's
own pipeline, its networks run on our reference executor and judged by the float64 rule
(DESIGN D16, ``conformance/peer.py``). Run it in the peer's environment
(``../shared/peer/setup.sh``) with this checkout on PYTHONPATH. Each failure is classified
by ``conformance/peer_triage.py``; the run ends with the line

    peer: N cases, C converted, P pass, F fail (B peer bug, E executor, D deviation, U unclassified)

``--backend torch_trt_ref`` runs the same cells through our own compiler instead (engines
built, slower)."""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import multiprocessing
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

BACKENDS = {"torch_tensorrt": "conformance.peer_cells", "torch_trt_ref": "conformance.ours"}
OPINFO_SETS = ("manifest", "ci", "none")
_WORKER: dict = {}


def cell_ids(opinfo_set: str) -> list[str]:
    """Our case cells (``runner.cells`` ids), then OpInfo cells as ``opinfo:<id>``."""
    from .opinfo import CI_SAMPLES, MANIFEST
    from .runner import all_cases, cells

    ids = [cid for cid, *_ in cells(all_cases())]
    if opinfo_set != "none":  # the manifest's ids as they are (no op_db needed here)
        listed = [line.strip() for line in MANIFEST.read_text().splitlines()
                  if line.strip() and not line.startswith("#")]
        ids += [f"opinfo:{c}" for c in listed
                if opinfo_set == "manifest" or int(c.rsplit("-s", 1)[1]) < CI_SAMPLES]
    return ids


def _group(cell_id: str) -> str:
    """Cells of one op (one OpInfo) run in one task: samples are made once."""
    if cell_id.startswith("opinfo:"):
        return cell_id.rsplit("-", 2)[0]
    return cell_id.split("-", 1)[0]


def _init(backend: str) -> None:
    from .runner import all_cases, cells

    _WORKER["backend"] = importlib.import_module(BACKENDS[backend])
    _WORKER["cells"] = {cid: (case, dtype, dyn) for cid, case, dtype, dyn in cells(all_cases())}


def _run(ids: list[str]) -> list[tuple[str, dict]]:
    from .opinfo import CellKey, Outcome

    backend, out = _WORKER["backend"], []
    for cid in ids:
        start = time.perf_counter()
        try:
            if cid.startswith("opinfo:"):
                outcome = backend.run_opinfo_cell(CellKey.parse(cid[len("opinfo:"):]))
            else:
                outcome = backend.run_case_cell(*_WORKER["cells"][cid])
        except Exception as err:  # a bug of this harness: reported, never hidden
            outcome = Outcome("harness_error", f"{type(err).__name__}: {err}")
        outcome.seconds = time.perf_counter() - start
        if outcome.outcome != "absent":
            out.append((cid, outcome.to_json()))
    _settle_heap()
    return out


def _settle_heap() -> None:
    """Collect a task's garbage, then freeze what survives (modules, torch's op tables,
    the OpInfo database, caches) out of the collector's sight: its automatic full
    collections then walk only what later tasks made, not the whole heap again (each took
    0.3 s, 0.06 CPU-s a cell). A collection here walks only the unfrozen objects too."""
    gc.collect()
    gc.freeze()


def run(ids: list[str], backend: str, jobs: int, progress: Path | None) -> dict[str, dict]:
    groups: dict[str, list[str]] = defaultdict(list)
    for cid in ids:
        groups[_group(cid)].append(cid)
    results, start = {}, time.time()
    if jobs == 1:  # in this process: no second import of torch and the backend
        _init(backend)
        for got in map(_run, groups.values()):
            results.update(got)
        return dict(sorted(results.items()))
    with multiprocessing.get_context("spawn").Pool(jobs, _init, (backend,),
                                                   maxtasksperchild=100) as pool:
        for k, got in enumerate(pool.imap_unordered(_run, list(groups.values())), 1):
            results.update(got)
            if progress:
                with progress.open("a") as f:
                    f.writelines(json.dumps({c: v}) + "\n" for c, v in got)
            if k % 50 == 0:
                print(f"[{backend}] {k}/{len(groups)} ops, {len(results)} cells, "
                      f"{time.time() - start:.0f}s", file=sys.stderr, flush=True)
    return dict(sorted(results.items()))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m conformance", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=sorted(BACKENDS), default="torch_tensorrt")
    parser.add_argument("--opinfo", choices=OPINFO_SETS, default="ci",
                        help="OpInfo cells: the CI subset (first samples, default), every "
                        "converted cell of the manifest, or none")
    parser.add_argument("--only", action="append", default=[], metavar="TEXT",
                        help="only cells whose id contains TEXT (repeatable: any of them)")
    parser.add_argument("--every", type=int, default=1, metavar="K",
                        help="every K-th cell only (a quick sample of the whole suite)")
    parser.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--json", default="out/peer_conformance.json")
    parser.add_argument("--resume", action="store_true",
                        help="keep the cells already in <json>.partial")
    args = parser.parse_args(argv)
    from .peer_report import summary_line, write_report

    ids = [c for c in cell_ids(args.opinfo) if not args.only or any(t in c for t in args.only)]
    ids = ids[::args.every]
    progress = Path(args.json + ".partial")
    progress.parent.mkdir(parents=True, exist_ok=True)
    done: dict[str, dict] = {}
    if args.resume and progress.exists():
        for line in progress.read_text().splitlines():
            done.update(json.loads(line) if line.strip() else {})
    else:
        progress.write_text("")
    start = time.time()
    results = {**done, **run([c for c in ids if c not in done], args.backend, args.jobs,
                             progress)}
    seconds = time.time() - start
    write_report(results, Path(args.json), args.backend, seconds, len(ids))
    print(f"{len(results)} cells in {seconds:.0f} s with {args.jobs} jobs", file=sys.stderr)
    print(summary_line(results, args.backend))
    return 0

