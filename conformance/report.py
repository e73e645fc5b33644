"""Conformance report: markdown table (op x dtype x static/dynamic) from the JSON the suite
writes, plus a coverage diff against Torch-TensorRT 2.14's converter targets."""

from __future__ import annotations

import argparse
import json
import os
from collections import defaultdict
from pathlib import Path

from .coverage import our_targets, reference_targets
from .coverage import render as coverage  # the targets we lack, each with its reason

SYMBOL = {"passed": "pass", "xfail": "xfail", "fail": "FAIL"}


def summarize(cells: dict[str, dict]) -> dict:
    counts = defaultdict(int)
    for cell in cells.values():
        counts[cell["outcome"]] += 1
    total = sum(counts.values())
    return {"total": total, **counts,
            "pass_rate": round(counts["passed"] / total, 4) if total else 0.0}


def _g(x) -> str:
    return "-" if x is None else f"{x:.3g}"


def accuracy_section(cells: dict[str, dict]) -> list[str]:
    """Errors vs float64 per cell (worst ratio first) and the cells judged otherwise."""
    judged = {c: v["accuracy"] for c, v in cells.items()
              if v.get("accuracy", {}).get("rule") == "float64"}
    other = {c: v["accuracy"] for c, v in cells.items()
             if v.get("accuracy") and v["accuracy"].get("rule") != "float64"}
    every = {**judged, **other}
    changed = sorted(c for c, a in every.items() if a.get("tolerance_passed") is not None
                     and a["tolerance_passed"] != a.get("passed"))
    disagree = ", ".join(f"`{c}` (tolerance {'pass' if every[c]['tolerance_passed'] else 'fail'}"
                         f", rule {'pass' if every[c].get('passed') else 'fail'})"
                         for c in changed)
    lines = [f"{len(judged)} cells judged by the float64 rule (compiled RMSE vs float64 <= "
             "k x eager's RMSE in the cell dtype + a floor; docs/converters.md), "
             f"{len(other)} by exact or tolerance comparison (no float64 reference). "
             f"{len(changed)} cells where the old per-dtype tolerance and the rule disagree"
             + (f": {disagree}" if changed else "") + ".", ""]
    rows = sorted(judged.items(), key=lambda kv: (kv[1].get("passed", True),
                                                  -(kv[1].get("ratio") or 0.0), kv[0]))
    lines += ["| cell | compiled RMSE | eager RMSE | ratio | allowed RMSE | compiled max abs "
              "| eager max abs | verdict |", "|---|---|---|---|---|---|---|---|"]
    lines += [f"| {c} | {_g(a.get('compiled_rmse'))} | {_g(a.get('eager_rmse'))} | "
              f"{_g(a.get('ratio'))} | {_g(a.get('allowed_rmse'))} | "
              f"{_g(a.get('compiled_max_abs'))} | {_g(a.get('eager_max_abs'))} | "
              f"{'pass' if a.get('passed') else 'FAIL'} |" for c, a in rows]
    reasons: dict[str, list[str]] = defaultdict(list)
    for c, a in other.items():
        reasons[f"{a.get('rule')}: {a.get('fallback', '')}"].append(c)
    if reasons:
        lines += ["", "Cells without a float64 reference:", ""]
        lines += [f"- {why} ({len(cs)}): " + ", ".join(f"`{c}`" for c in sorted(cs))
                  for why, cs in sorted(reasons.items())]
    return lines


def render(cells: dict[str, dict], ours: set[str], theirs: set[str]) -> str:
    table: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    columns = set()
    for cell_id, cell in cells.items():
        op, _, rest = cell_id.partition("-")
        _sample, dtype, variant = rest.rsplit("-", 2)
        column = f"{dtype} {variant}"
        columns.add(column)
        table[op][column].append(SYMBOL.get(cell["outcome"], cell["outcome"]))
    order = sorted(columns, key=lambda c: (["fp32", "fp16", "bf16", "int32", "int64",
                                            "bool"].index(c.split()[0]), c))
    s = summarize(cells)
    lines = [
        "# Conformance report", "",
        f"{s['total']} cells: {s.get('passed', 0)} pass, {s.get('xfail', 0)} xfail, "
        f"{s.get('fail', 0)} fail (pass rate {s['pass_rate']:.1%}); "
        f"{len([o for o in ours if o.startswith('aten.')])} ATen overloads with converters.", "",
        "| op | " + " | ".join(order) + " |",
        "|---|" + "---|" * len(order),
    ]
    for op in sorted(table):
        row = []
        for column in order:
            marks = table[op].get(column, [])
            if not marks:
                row.append("")
            elif all(m == "pass" for m in marks):
                row.append("pass")
            else:
                row.append("/".join(sorted(set(marks))))
        lines.append(f"| {op} | " + " | ".join(row) + " |")
    xfails = {c: v["reason"] for c, v in cells.items() if v["outcome"] == "xfail"}
    if xfails:
        lines += ["", "## Known gaps (xfail)", ""]
        lines += [f"- `{c}`: {r}" for c, r in sorted(xfails.items())]
    fails = {c: v.get("error", "") for c, v in cells.items() if v["outcome"] == "fail"}
    if fails:
        lines += ["", "## Failures", ""]
        lines += [f"- `{c}`: {e}" for c, e in sorted(fails.items())]
    lines += ["", "## Accuracy vs float64", ""] + accuracy_section(cells)
    lines += ["", "## Coverage against Torch-TensorRT 2.14", "", coverage()]
    lines += [f"Ops we convert that they do not ({len(ours - theirs)}):", ""]
    lines += [", ".join(f"`{o}`" for o in sorted(ours - theirs)) or "(none)", ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("results", help="JSON written by pytest --conformance-json")
    parser.add_argument("--markdown", default=None, help="write the markdown report here")
    args = parser.parse_args(argv)
    cells = json.loads(Path(args.results).read_text())["cells"]
    text = render(cells, our_targets(), reference_targets())
    if args.markdown:
        os.makedirs(os.path.dirname(args.markdown) or ".", exist_ok=True)
        Path(args.markdown).write_text(text)
    summary = summarize(cells)
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
