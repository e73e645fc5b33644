"""Counts, classification and the JSON report of a ``python -m conformance`` run: the
summary line, and per op family the pass rate of the backend next to ours on the same
cells (ours: every cell passes but the strict xfails, which CI enforces)."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from .peer_triage import CLASSES, classify

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


assert set(CLASSES) == {"peer_bug", "executor", "deviation"}
