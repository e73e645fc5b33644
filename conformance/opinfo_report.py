"""Runs the OpInfo cells in worker processes and reports them per OpInfo and per dtype
(markdown for humans, JSON for tools); ``--write-manifest`` records which cells convert
fully (the CI subset of test_opinfo.py picks from that list).

    python -m conformance.opinfo_report --full -j 2 --json out/opinfo.json \
        --markdown out/opinfo.md --write-manifest
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import time
from collections import defaultdict
from pathlib import Path

from .opinfo import (
    CI_SAMPLES,
    COUNTED,
    DTYPES,
    FAILURES,
    FLOAT_DTYPES,
    FULL_SAMPLES,
    MANIFEST,
    CellKey,
    cell_keys,
    run_cell,
    write_manifest,
)
from .opinfo_xfail import XFAIL


def summarize(cells: dict[str, dict]) -> dict:
    """Counts overall and per dtype; the pass rate is over the cells that converted fully
    (passed + failures + strict xfails)."""
    def count(items):
        c = defaultdict(int)
        for cell_id, cell in items:
            c[cell["outcome"]] += 1
            if cell["outcome"] in FAILURES and cell_id in XFAIL:
                c["xfail"] += 1
        converted = sum(c[o] for o in COUNTED)
        return {"cells": sum(v for k, v in c.items() if k != "xfail"), "converted": converted,
                **dict(sorted(c.items())),
                "pass_rate": round(c["passed"] / converted, 4) if converted else 0.0}

    by_dtype = defaultdict(list)
    for cell_id, cell in cells.items():
        by_dtype[CellKey.parse(cell_id).dtype].append((cell_id, cell))
    return {"overall": count(cells.items()),
            "per_dtype": {d: count(by_dtype[d]) for d in DTYPES if d in by_dtype}}


def _line(name: str, s: dict) -> str:
    fails = " / ".join(str(s.get(o, 0)) for o in FAILURES)
    return (f"| {name} | {s['cells']} | {s.get('not_converted', 0)} | "
            f"{s.get('not_exported', 0) + s.get('skipped', 0)} | {s['converted']} | "
            f"{s.get('passed', 0)} | {fails} | {s.get('xfail', 0)} | {s['pass_rate']:.2%} |")


def render(cells: dict[str, dict], title: str) -> str:
    summary = summarize(cells)
    head = ["| | cells | not converted | not exported/skipped | converted | passed | "
            "mismatch / compile error / run error / harness error | of which strict xfail | "
            "pass rate |",
            "|---|---|---|---|---|---|---|---|---|"]
    lines = [f"# {title}", "", *head, _line("all", summary["overall"])]
    lines += [_line(d, s) for d, s in summary["per_dtype"].items()]
    per_op: dict[str, list] = defaultdict(list)
    for cell_id, cell in cells.items():
        key = CellKey.parse(cell_id)
        per_op[key.id.rsplit("-", 2)[0]].append((cell_id, cell))
    lines += ["", "## Per OpInfo (converted cells only)", "",
              "| OpInfo | converted | passed | failed | not converted |", "|---|---|---|---|---|"]
    for op in sorted(per_op):
        s = summarize(dict(per_op[op]))["overall"]
        if s["converted"]:
            lines.append(f"| {op} | {s['converted']} | {s.get('passed', 0)} | "
                         f"{s['converted'] - s.get('passed', 0)} | {s.get('not_converted', 0)} |")
    failed = sorted((c, v) for c, v in cells.items() if v["outcome"] in FAILURES)
    if failed:
        lines += ["", "## Failures (xfail reason where the table has one)", ""]
        lines += [f"- `{c}` {v['outcome']}: {XFAIL.get(c, v['message'])}" for c, v in failed]
    reasons = defaultdict(int)
    for v in cells.values():
        if v["outcome"] == "not_converted":
            reasons[v["message"][:120]] += 1
    lines += ["", "## Most common reasons a cell does not convert", ""]
    lines += [f"- {n} x {r}" for r, n in sorted(reasons.items(), key=lambda x: -x[1])[:40]]
    return "\n".join(lines) + "\n"


def _run_op(keys: list[CellKey]) -> list[tuple[str, dict]]:
    out = []
    for k in keys:
        outcome = run_cell(k)
        if outcome.outcome != "absent":
            out.append((k.id, outcome.to_json()))
    return out


def run_all(keys: list[CellKey], jobs: int, progress: str | None = None,
            ray_address: str | None = None, ray: bool = False) -> dict[str, dict]:
    """Cells of one OpInfo run in one worker (samples are made once per OpInfo); each
    finished cell is appended to ``progress`` (JSON lines) as it comes. With ``ray`` (or a
    ``ray_address``) the OpInfos are Ray tasks instead of a local process pool."""
    groups: dict[tuple, list[CellKey]] = defaultdict(list)
    for k in keys:
        groups[(k.op, k.variant)].append(k)
    if ray or ray_address:
        from .opinfo_ray import run_groups_on_ray

        return dict(sorted(run_groups_on_ray(list(groups.values()), _run_op, progress,
                                             ray_address).items()))
    cells, done, start = {}, 0, time.time()
    with multiprocessing.get_context("spawn").Pool(jobs, maxtasksperchild=200) as pool:
        for results in pool.imap_unordered(_run_op, list(groups.values())):
            cells.update(results)
            if progress:
                with open(progress, "a") as f:
                    f.writelines(json.dumps({c: v}) + "\n" for c, v in results)
            done += 1
            if done % 50 == 0:
                print(f"[opinfo] {done}/{len(groups)} OpInfos, {len(cells)} cells, "
                      f"{time.time() - start:.0f}s", flush=True)
    return dict(sorted(cells.items()))


def _load_partial(path: str) -> dict[str, dict]:
    cells: dict[str, dict] = {}
    if os.path.exists(path):
        for line in Path(path).read_text().splitlines():
            if line.strip():
                cells.update(json.loads(line))
    return cells


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--full", action="store_true",
                        help=f"every OpInfo, {FULL_SAMPLES} samples per dtype (default: the "
                             f"manifest's cells, {CI_SAMPLES} samples per OpInfo and dtype)")
    parser.add_argument("--op", action="append", help="only these OpInfos (name[.variant])")
    parser.add_argument("--resume", action="store_true",
                        help="keep the cells already in <json>.partial (an interrupted run)")
    parser.add_argument("--ints", action="store_true", help="also int32 and int64 cells")
    parser.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--ray", action="store_true",
                        help="run the OpInfos as Ray tasks on a local Ray instance (the [ray] "
                        "extra)")
    parser.add_argument("--ray-address", metavar="ADDRESS",
                        help="join an existing Ray cluster instead (auto, ray://HOST:10001)")
    parser.add_argument("--json", default="out/opinfo.json")
    parser.add_argument("--markdown", default="out/opinfo.md")
    parser.add_argument("--write-manifest", action="store_true",
                        help=f"record the converted cells in {MANIFEST.name}")
    args = parser.parse_args(argv)
    from .opinfo import ci_keys, split_op

    ops = {split_op(o) for o in args.op} if args.op else None
    dtypes = tuple(DTYPES) if args.ints else FLOAT_DTYPES
    keys = cell_keys(FULL_SAMPLES, ops, dtypes) if args.full or ops else ci_keys()
    os.makedirs(os.path.dirname(args.json) or ".", exist_ok=True)
    progress = args.json + ".partial"
    done = _load_partial(progress) if args.resume else {}
    if not args.resume:
        Path(progress).write_text("")
    cells = {**done, **run_all([k for k in keys if k.id not in done], args.jobs, progress,
                                    args.ray_address, args.ray)}
    cells = dict(sorted(cells.items()))
    import torch

    which = "full set" if args.full else "selected OpInfos" if ops else "CI subset"
    title = f"OpInfo conformance ({which}, {', '.join(dtypes)}, torch {torch.__version__})"
    for path, text in ((args.json, json.dumps({"title": title, "summary": summarize(cells),
                                                "cells": cells}, indent=1)),
                       (args.markdown, render(cells, title))):
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        Path(path).write_text(text)
    if args.write_manifest:
        write_manifest(cells)
    print(json.dumps(summarize(cells)["overall"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
