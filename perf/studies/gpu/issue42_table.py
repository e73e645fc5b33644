"""The issue 42 table from ``zoo latency`` records (perf-data/results/gpu/issue42): per
program, ours (the graphed inductor replay and the graphed plain replay) against
``torch.compile`` reduce-overhead and max-autotune, from the record of the quietest process
that timed it (a later file wins: call C ran one process at a time), with the ratio of
every other process that timed the same program (the between-process spread).
Usage: python perf/studies/gpu/issue42_table.py RECORDS.jsonl... (oldest first)"""

from __future__ import annotations

import json
import re
import sys


def _name(record: dict) -> str:
    """The program without the copy prefixes (``rep_``, ``1q_``, ``2ma_``)."""
    return re.sub(r"^(rep_|\dq_|\dma_)", "", record["program"]).removesuffix(".prog")


def _ms(t: dict | None) -> str:
    if t is None:
        return "-"
    rounds = t.get("round_medians_ms", [])
    return f"{t['median_ms']:.3f} ({min(rounds):.3f}-{max(rounds):.3f})"


def _ratio(lat: dict, ours: str, anchor: str) -> float | None:
    if ours not in lat or anchor not in lat:
        return None
    return lat[ours]["median_ms"] / lat[anchor]["median_ms"]


def _before_fix(tag: str, name: str) -> str:
    """Call A ran the BERTs before the gather fix (their replay broke into 9 graphs)."""
    return ", 9 graphs" if tag == "callA" and name.startswith("bert") else ""


def table(files: list[str]) -> str:
    seen: dict[str, list[tuple[str, dict]]] = {}
    for path in files:
        tag = re.sub(r".*lat_(\w+)\.jsonl$", r"\1", path)
        for line in open(path):
            record = json.loads(line)
            if record.get("status") == "ok":
                seen.setdefault(_name(record), []).append((tag, record))
    rows = ["| program | float64 rule (first / plain / inductor replay) | reduce-overhead ms "
            "| max-autotune ms | ours inductor replay ms | ours plain replay ms "
            "| ours / reduce-overhead | ours / max-autotune | run | ours / reduce-overhead "
            "in the other processes |", "|" + "---|" * 10]
    for name in sorted(seen, key=lambda n: (n.split("-")[0], n.split("-")[2], n)):
        runs = seen[name]
        tag, best = runs[-1]
        lat, acc = best["latency"], best["accuracy"]
        rule = ("ok" if acc["passed"] else "FAIL") + " (" + " / ".join(
            f"{x:.2f}" for x in (acc["ratio"], acc["graphed"]["ratio"],
                                 acc["graphed_inductor"]["ratio"])) + ")"
        ro = _ratio(lat, "ours_inductor_graphs", "reduce_overhead")
        ma = _ratio(lat, "ours_inductor_graphs", "max_autotune")
        others = ", ".join(f"{_ratio(r['latency'], 'ours_inductor_graphs', 'reduce_overhead'):.2f}x"
                           f" ({t}{_before_fix(t, name)})" for t, r in runs[:-1]) or "-"
        rows.append(f"| {name} | {rule} | {_ms(lat.get('reduce_overhead'))} | "
                    f"{_ms(lat.get('max_autotune'))} | {_ms(lat.get('ours_inductor_graphs'))} | "
                    f"{_ms(lat.get('ours_engine_graphs'))} | "
                    f"{'-' if ro is None else f'**{ro:.2f}x**' if ro <= 1 else f'{ro:.2f}x'} | "
                    f"{'-' if ma is None else f'{ma:.2f}x'} | {tag} | {others} |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    print(table(sys.argv[1:]))
