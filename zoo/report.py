"""The markdown report of one or more sweeps: environment, per-cell table, ratios vs the
anchor, resource partitioning, the unsupported-op histogram, the decoder-LLM cells and the
errors."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any, Iterable

from .anchors import MIN_WEIGHTS, RSS_TARGET, TIME_TARGET, anchor_rows

MiB = 2**20


def table(header: Iterable[str], rows: Iterable[Iterable[Any]]) -> list[str]:
    header = list(header)
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join("" if c is None else str(c) for c in row) + " |" for row in rows]
    return out


def mib(n: float | None) -> str:
    return "-" if n is None else f"{n / MiB:.1f}"


def num(x: float | None, fmt: str = ".2f") -> str:
    return "-" if x is None else format(x, fmt)


def cell_row(r: dict) -> list[Any]:
    c = r["cell"]
    strategy = c["strategy"] + (" +rp" if c["resource_partitioning"] else "")
    if r.get("status") != "ok" and "partition" not in r:
        err = r.get("error") or {}
        why = f"{r['status']} at {err.get('stage')}: {err.get('type')}"
        return [c["model"], strategy, c["precision"], why] + ["-"] * 9
    p, ops, lat, acc = r["partition"], r["ops"], r.get("latency"), r.get("accuracy")
    weights = r["memory"]["weight_bytes"]
    rss = r["memory"]["peak_rss_bytes"]
    per_w = f" ({rss / weights:.1f}x)" if weights >= MIN_WEIGHTS else ""
    latency = f"{lat['median_s'] * 1e3:.1f} / {lat['p90_s'] * 1e3:.1f}" if lat else "-"
    accuracy, rule = "-", "-"
    if acc:
        accuracy = f"{acc['max_abs_error']:.2g} / {num(acc['cosine'], '.5f')}"
        rule = accuracy_cell(acc)
    status = r["status"] if r["status"] == "ok" else f"{r['status']} ({r['error']['stage']})"
    return [c["model"], strategy, c["precision"], status, p["engines"], p["torch_segments"],
            p["transitions"], f"{ops['supported']}/{ops['total']}",
            f"{r['outside_builder_seconds']:.2f} + {r['phases'].get('build', 0):.2f}",
            mib(rss) + per_w, latency, accuracy, rule]


def accuracy_passed(acc: dict) -> bool | None:
    """The accuracy verdict of a record (``within_tolerance`` in version-1 records)."""
    return acc.get("passed", acc.get("within_tolerance"))


def accuracy_cell(acc: dict) -> str:
    """"compiled / eager RMSE vs float64 (ratio)", flagged ✗ when the rule fails; the max
    abs tolerance verdict for records judged without a float64 run."""
    flag = "" if accuracy_passed(acc) else " ✗"
    if acc.get("compiled_rmse") is None:
        return f"tolerance {num(acc.get('tolerance'), '.2g')}{flag}"
    return (f"{acc['compiled_rmse']:.2g} / {acc['eager_rmse']:.2g} "
            f"({num(acc.get('ratio'), '.2f')}){flag}")


CELL_HEADER = ["model", "strategy", "precision", "status", "TRT engines", "torch segments",
               "transitions", "supported/total ops", "compile s (outside builder + build)",
               "peak RSS MiB (x weights)", "latency ms median / p90",
               "max abs err / cosine vs fp32", "RMSE vs fp64: compiled / eager (ratio)"]


def environment_lines(records: list[dict]) -> list[str]:
    envs = {tuple(sorted((k, str(v)) for k, v in r.get("env", {}).items() if k != "git_commit"))
            for r in records}
    commits = sorted({str(r.get("env", {}).get("git_commit")) for r in records})
    lines = []
    for env in envs:
        e = dict(env)
        lines.append(f"- torch {e.get('torch')}, {e.get('tensorrt_backend')} {e.get('tensorrt')}"
                     f", torchvision {e.get('torchvision')}, transformers {e.get('transformers')}"
                     f", python {e.get('python')}")
        lines.append(f"- machine: {e.get('cpu')}, {e.get('cpu_count')} cores, "
                     f"{int(e.get('memory_bytes', 0)) / 2**30:.0f} GiB, GPU: {e.get('gpu')}")
    executors = sorted({f"{r['latency']['executor']} on {r['latency']['device']}"
                        for r in records if r.get("latency")})
    lines.append(f"- commit{'s' if len(commits) > 1 else ''}: {', '.join(commits)}")
    lines.append("- latency measured with: " + (", ".join(executors) or "-"))
    return lines


def anchor_section(records: list[dict]) -> list[str]:
    rows = anchor_rows(records)
    if not rows:
        return ["No successful fp32 cell to compare with the anchor."]
    out = [f"Targets: time outside the builder (every phase but the TensorRT builder "
           f"call: capture, lowering, partition, conversion, engine, weights) "
           f"<= {TIME_TARGET}x the anchor; peak compile RSS above baseline <= {RSS_TARGET}x "
           "the fp32 weight bytes. The time target is judged on this process's CPU seconds, "
           "which other processes on a shared machine do not inflate; wall seconds are shown "
           "beside them.", ""]
    isolations = sorted({r.get("isolation", "unrecorded") for r in records
                         if r.get("status") == "ok"})
    out[0] += f" Cell isolation: {', '.join(isolations)} (see docs/zoo.md: fork adds ~0.5-1 s)."
    warmups = [r["process_warmup_seconds"] for r in records if r.get("process_warmup_seconds")]
    if warmups:
        out[0] += (" Each cell's process had captured a two-op module once before "
                   f"(torch.export's one-time initialization, {max(warmups):.2f} s, not "
                   "included).")
    body, over_rss = [], False
    for row in rows:
        ratio = row["cpu_time_ratio"] if row["cpu_time_ratio"] is not None else row["time_ratio"]
        t_ok = ratio is not None and ratio <= TIME_TARGET
        m_ok = row["rss_per_weight"] is not None and row["rss_per_weight"] <= RSS_TARGET
        over_rss |= row["rss_per_weight"] is not None and not m_ok
        body.append([
            row["model"], row["strategy"],
            f"{row['outside_builder_s']:.2f} / {num(row['outside_builder_cpu_s'])}",
            num(row["anchor_s"], ".1f"),
            "-" if row["time_ratio"] is None else
            f"{row['time_ratio']:.2f} / {num(row['cpu_time_ratio'])} {'✓' if t_ok else '✗'}",
            mib(row["peak_rss_bytes"]), mib(row["weight_bytes"]),
            "-" if row["rss_per_weight"] is None else
            f"{row['rss_per_weight']:.2f} {'✓' if m_ok else '✗'}",
            mib(row["anchor_rss_bytes"]), num(row["anchor_rss_per_weight"]),
            num(row["rss_vs_anchor"])])
    out += table(["model", "strategy", "outside builder s (wall / CPU)", "anchor s",
                  "ours/anchor (wall / CPU)", "peak RSS MiB", "fp32 weights MiB",
                  "RSS/weights", "anchor RSS MiB", "anchor RSS/weights",
                  "RSS ours/anchor"], body)
    if over_rss:
        out += ["", BUILDER_FLOOR_NOTE]
    return out


ACCURACY_NOTE = (
    "Accuracy: a cell passes when its output RMSE against eager float64 is at most k x the "
    "RMSE of eager in the cell's precision (k = 2 fp32, 3 fp16/bf16 and outputs under 1000 "
    "elements) plus 4 ulps of the output's RMS magnitude; ✗ marks a cell that fails "
    "(docs/zoo.md, Accuracy). Max abs error and cosine are against eager fp32.")


BUILDER_FLOOR_NOTE = (
    "RSS above the target: the TensorRT-RTX builder alone (its build call, nothing of ours) "
    "peaks at ~130 MiB or more however small the weights, and at ~130 MiB plus ~2x the "
    "weights for convolutional networks: 16 small convolutions 130 MiB for 0.7 MiB of "
    "weights, resnet18 221 MiB (5.0x), mobilenet_v2 158 MiB (11.7x), bert_2layer 164 MiB "
    "(9.8x) (`python -m perf.studies.builder_floor`). No builder setting lowers it (optimization "
    "level, tactic count, aux streams, memory pools, compute capability). The anchor, on the "
    "same builder, needs 186 MiB (4.2x) for resnet18.")


def memory_section(records: list[dict]) -> list[str]:
    """Where the peak compile RSS is reached: peak above baseline within each phase."""
    body = []
    for r in records:
        phases = r.get("memory", {}).get("peak_by_phase")
        c = r["cell"]
        if not phases or c["precision"] != "fp32" or c["resource_partitioning"]:
            continue
        body.append([c["model"], c["strategy"], mib(r["memory"]["weight_bytes"]),
                     *(mib(phases.get(p)) for p in PHASE_WINDOWS),
                     mib(r["memory"]["peak_rss_bytes"]), mib(r["engines"]["plan_bytes"])])
    if not body:
        return ["No fp32 cell with a memory timeline."]
    return table(["model", "strategy", "fp32 weights MiB",
                  *(f"peak in {p} MiB" for p in PHASE_WINDOWS), "peak MiB", "plans MiB"], body)


PHASE_WINDOWS = ("capture", "lowering", "partition", "conversion+build")


def resource_section(records: list[dict]) -> list[str]:
    """Resource-partitioning cells next to the same cell without it."""
    plain = {(r["cell"]["model"], r["cell"]["strategy"], r["cell"]["precision"]): r
             for r in records if not r["cell"]["resource_partitioning"]}
    body = []
    for r in records:
        c = r["cell"]
        if not c["resource_partitioning"] or r.get("status") != "ok":
            continue
        base = plain.get((c["model"], c["strategy"], c["precision"]))
        eng = r["engines"]
        budget = eng.get("engine_memory_budget")
        fits = budget is not None and eng["largest_weight_bytes"] <= budget
        base_ok = base is not None and base.get("status") == "ok"
        tensor = r.get("model", {}).get("largest_tensor_bytes")
        body.append([c["model"], c["strategy"], c["precision"], mib(budget), mib(tensor),
                     base["engines"]["count"] if base_ok else "-", eng["count"],
                     mib(base["engines"]["largest_weight_bytes"]) if base_ok else "-",
                     f"{mib(eng['largest_weight_bytes'])} {'✓' if fits else '✗'}",
                     mib(base["memory"]["peak_rss_bytes"]) if base_ok else "-",
                     mib(r["memory"]["peak_rss_bytes"])])
    if not body:
        return ["No resource-partitioning cell compiled."]
    return ["An engine cannot be smaller than the largest single weight tensor it holds "
            "(fp32 size shown), so a budget below it cannot be met.", ""] + table(
                 ["model", "strategy", "precision", "engine budget MiB",
                  "largest fp32 tensor MiB", "engines",
                  "engines (rp)", "largest engine weights MiB", "largest (rp), fits budget",
                  "peak RSS MiB", "peak RSS MiB (rp)"], body)


def quantized_section(records: list[dict]) -> list[str]:
    """Quantized cells (int8, fp8) beside the same model's fp32/fp16/bf16 cells: Q/DQ layers,
    calibration time, the float64 rule against the eager quantized model, and cosine /
    top-1 agreement with eager fp32 (reported, not judged)."""
    cosines: dict[tuple, dict[str, str]] = defaultdict(dict)
    for r in records:
        c, acc = r["cell"], r.get("accuracy") or {}
        cosines[(c["model"], c["strategy"])][c["precision"]] = num(acc.get("cosine"), ".5f")
    body = []
    for r in records:
        c, q = r["cell"], r.get("quantization")
        if not q:
            continue
        acc = r.get("accuracy") or {}
        others = cosines[(c["model"], c["strategy"])]
        body.append([c["model"], c["strategy"], c["precision"], q.get("quantize", "-"),
                     q.get("dequantize", "-"), f"{q['calibration_seconds']:.2f}",
                     "✓" if acc.get("passed") else "✗", num(acc.get("ratio")),
                     num(acc.get("cosine"), ".5f"), num(acc.get("top1_vs_fp32"), ".3f"),
                     " / ".join(others.get(p, "-") for p in ("fp16", "bf16"))])
    if not body:
        return ["No quantized cell."]
    return table(["model", "strategy", "precision", "Q layers", "DQ layers", "calibration s",
                  "float64 rule vs fake-quant", "ratio", "cosine vs fp32", "top-1 vs fp32",
                  "cosine fp16 / bf16"], body)


def unsupported_section(records: list[dict]) -> list[str]:
    """Ops without TensorRT support: nodes per model (fp32 graphs, any strategy)."""
    per_op: dict[str, dict[str, int]] = defaultdict(dict)
    reasons: dict[str, set] = defaultdict(set)
    for r in records:
        if "ops" not in r or r["cell"]["precision"] != "fp32":
            continue
        for op, n in r["ops"]["unsupported"].items():
            per_op[op][r["cell"]["model"]] = n
            reasons[op].update(r["ops"]["reasons"].get(op, []))
    if not per_op:
        return ["Every op of every compiled fp32 graph is supported."]
    totals = Counter({op: sum(m.values()) for op, m in per_op.items()})
    body = [[op, n, ", ".join(f"{m} ({k})" for m, k in sorted(per_op[op].items())),
             "; ".join(sorted(reasons[op]))[:120]] for op, n in totals.most_common()]
    return table(["op", "nodes", "models (nodes)", "reason"], body)


def llm_section(records: list[dict]) -> list[str]:
    """The decoder-LLM cells of a sweep (``kind: "llm"``, zoo/llm_cells.py): latencies on
    the executor named, beside transformers' static-cache ``generate`` in the same
    process."""
    body = []
    for r in records:
        if r.get("status") != "ok":
            continue
        m = r["llm"]
        d = m["decode_ms"]
        body.append([r["cell"]["key"], m["executor"], f"{m['prompt_len']} + {m['new_tokens']}",
                     num(m["prefill_ms"]["median"], ".1f"),
                     f"{num(d['median'], '.1f')} ({num(d['p10'], '.1f')}.."
                     f"{num(d['p90'], '.1f')})", num(m["tokens_per_s"]["median"], ".1f"),
                     num(m["eager_static_cache_tokens_per_s"]["median"], ".1f"), m["engines"],
                     m["profiles"], m["cache_bytes"], m["in_place"],
                     f"{m['tokens_equal_to_transformers']}/{m['new_tokens']}"])
    if not body:
        return ["No decoder-LLM cell ran (or none succeeded)."]
    return table(["cell", "executor", "prompt + new tokens", "prefill ms",
                  "decode ms/token (p10..p90)", "tokens/s", "transformers static cache "
                  "tokens/s", "engines", "profiles", "cache bytes", "in place",
                  "tokens equal"], body)


def _inaccurate(r: dict) -> bool:
    return bool(r.get("accuracy")) and not accuracy_passed(r["accuracy"])


def error_section(records: list[dict]) -> list[str]:
    errors = [r for r in records if r.get("status") != "ok" or r.get("partition", {}).get(
        "fallbacks") or _inaccurate(r)]
    if not errors:
        return ["No cell failed."]
    lines = []
    for r in errors:
        if r.get("status") != "ok":
            e = r["error"]
            msg = (e.get("message") or "").strip().splitlines()
            lines.append(f"- `{r['cell']['key']}` {r['status']} at {e['stage']}: "
                         f"{e['type']}: {msg[0][:200] if msg else ''}")
        if _inaccurate(r):
            acc = r["accuracy"]
            why = acc.get("message") or (f"max abs error {acc.get('max_abs_error'):.3g} > "
                                         f"tolerance {acc.get('tolerance')}")
            lines.append(f"- `{r['cell']['key']}` fails the accuracy rule: {why[:300]}")
        for seg, why in r.get("partition", {}).get("fallbacks", {}).items():
            lines.append(f"- `{r['cell']['key']}` {seg} fell back to PyTorch: {why[:200]}")
    return lines


def markdown(records: list[dict], title: str = "Model zoo report",
             partition_anchor: list | None = None) -> str:
    """The report of ``records``; with ``partition_anchor`` rows (zoo.partition_anchor.Row)
    also the partition anchor table."""
    ok = sum(1 for r in records if r.get("status") == "ok")
    runs = sorted({r.get("run_id", "?") for r in records})
    out = [f"# {title}", "", f"{len(records)} cells ({ok} ok, {len(records) - ok} failed), "
           f"runs {', '.join(runs)}.", ""]
    wall = sum(r.get("wall_seconds", 0.0) for r in records)
    cpu = sum(r.get("cpu_seconds", 0.0) for r in records)
    out += [f"Sweep time: {wall / 60:.1f} min wall, {cpu / 60:.1f} min CPU in the cells "
            "(wall includes waiting for other processes on a shared machine).", ""]
    out += environment_lines(records) + ["", "## Cells", ""]
    decoders = [r for r in records if r.get("kind") == "llm"]
    everything, records = records, [r for r in records if r.get("kind") != "llm"]
    out += table(CELL_HEADER, [cell_row(r) for r in records])
    out += ["", ACCURACY_NOTE]
    out += ["", "## Ratios vs the anchor (Torch-TensorRT 2.13 + TensorRT-RTX, fp32)", ""]
    out += anchor_section(records)
    if partition_anchor:
        from .partition_anchor import section

        out += ["", "## Partition anchor: engines beside Torch-TensorRT's", ""]
        out += section(partition_anchor)
    out += ["", "## Peak compile memory by phase (fp32)", ""] + memory_section(records)
    out += ["", "## Resource partitioning", ""] + resource_section(records)
    out += ["", "## Quantized cells (docs/quantization.md)", ""] + quantized_section(records)
    out += ["", "## Unsupported ops", ""] + unsupported_section(records)
    if decoders:
        out += ["", "## Decoder-LLM cells (docs/llm.md)", ""] + llm_section(decoders)
    out += ["", "## Failures and fallbacks", ""] + error_section(everything)
    return "\n".join(out) + "\n"
