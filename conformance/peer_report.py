"""Counts, classification and the JSON report of a ``python -m conformance`` run: the
summary line, and per op family the pass rate of the backend next to ours on the same
cells (ours: every cell passes but the strict xfails, which CI enforces)."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from .peer_triage import classify

FAILURES = ("mismatch", "convert_error", "run_error", "harness_error")
CONVERTED = ("passed",) + FAILURES


def counts(results: dict[str, dict]) -> dict[str, int]:
    c = defaultdict(int, cases=len(results))
    for cid, r in results.items():
        c[r["outcome"]] += 1
        if r["outcome"] in CONVERTED:
            c["converted"] += 1
        if r["outcome"] in FAILURES:
            c["fail"] += 1
            found = classify(cid, r.get("message", ""))
            c[found[0] if found else "unclassified"] += 1
    return dict(c)


def summary_line(results: dict[str, dict], backend: str = "torch_tensorrt") -> str:
    c = defaultdict(int, counts(results))
    name = "peer" if backend == "torch_tensorrt" else backend
    return (f"{name}: {c['cases']} cases, {c['converted']} converted, {c['passed']} pass, "
            f"{c['fail']} fail ({c['peer_bug']} peer bug, {c['executor']} executor, "
            f"{c['deviation']} deviation, {c['unclassified']} unclassified)")


def write_report(results: dict[str, dict], path: Path, backend: str, seconds: float,
                 selected: int) -> None:
    """The cells with their outcome and classification, and the counts, as JSON."""
    cells = {}
    for cid, r in results.items():
        found = classify(cid, r.get("message", "")) if r["outcome"] in FAILURES else None
        cells[cid] = {**r, **({"class": found[0], "evidence": found[1]} if found else {})}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"backend": backend, "seconds": round(seconds, 1),
                                "selected": selected, "counts": counts(results),
                                "summary": summary_line(results, backend), "cells": cells},
                               indent=1))




def _families() -> dict[str, tuple[str, bool]]:
    """Case cell id -> (its module in conformance/cases, whether ours is a strict xfail)."""
    import importlib

    from .runner import case_modules, cells

    out = {}
    for module in case_modules():
        family = module.rsplit(".", 1)[1]
        for cid, case, dtype, dynamic in cells(getattr(importlib.import_module(module),
                                                       "CASES", [])):
            out[cid] = (family, case.xfail_reason(dtype, dynamic) is not None)
    return out


def family_table(results: dict[str, dict]) -> str:
    """Markdown: per op family (case module; OpInfo samples as one family), the cells, our
    pass rate on them (every cell passes but the strict xfails, which CI enforces) and the
    peer's: converted, passed, failed by class, and its pass rate over all cells."""
    from .opinfo_xfail import XFAIL

    families = _families()
    rows: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for cid, r in results.items():
        if cid.startswith("opinfo:"):
            family, ours_xfail = "OpInfo samples", cid[len("opinfo:"):] in XFAIL
        else:
            family, ours_xfail = families.get(cid, ("?", False))
        row = rows[family]
        row["cells"] += 1
        row["ours"] += not ours_xfail
        row[r["outcome"]] += 1
        if r["outcome"] in CONVERTED:
            row["converted"] += 1
        if r["outcome"] in FAILURES:
            found = classify(cid, r.get("message", ""))
            row[found[0] if found else "unclassified"] += 1
    lines = ["| family | cells | ours: pass | peer: converted | peer: pass | peer: fail "
             "(bug / executor / deviation / unclassified) | peer: pass rate |",
             "|---|---|---|---|---|---|---|"]
    total: dict[str, int] = defaultdict(int)
    for family in sorted(rows) + ["all"]:
        row = total if family == "all" else rows[family]
        if family != "all":
            for k, v in row.items():
                total[k] += v
        fails = sum(row[o] for o in FAILURES)
        lines.append(
            f"| {family} | {row['cells']} | {row['ours'] / row['cells']:.0%} | "
            f"{row['converted']} | {row['passed']} | {fails} ({row['peer_bug']} / "
            f"{row['executor']} / {row['deviation']} / {row['unclassified']}) | "
            f"{row['passed'] / row['cells']:.0%} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description="the per-family table of a peer run")
    parser.add_argument("results", help="JSON (or .partial JSON lines) of python -m conformance")
    args = parser.parse_args(argv)
    text = Path(args.results).read_text()
    if args.results.endswith(".partial"):
        results = {}
        for line in text.splitlines():
            results.update(json.loads(line) if line.strip() else {})
    else:
        results = json.loads(text)["cells"]
    print(family_table(results))
    print()
    print(summary_line(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
