"""Runs ONNX's node test cases through the reference executor (conformance.onnx_nodes) and
reports them: the overall figure, a per-layer-kind table, the failing cases of one kind;
writes JSON, markdown and the strict-xfail table conformance/onnx_xfail.py.

    python -m conformance.onnx_report                      # figure + per-kind table
    python -m conformance.onnx_report --kind SQUEEZE       # failing cases using SQUEEZE
    python -m conformance.onnx_report --case test_top_k    # one case in detail
    python -m conformance.onnx_report --json out/onnx_nodes.json --markdown out/onnx_nodes.md
    python -m conformance.onnx_report --write-xfails       # regenerate onnx_xfail.py
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import textwrap
import time
from collections import defaultdict
from pathlib import Path

from .onnx_nodes import (
    NOT_PARSED,
    OUTCOMES,
    PASSED,
    REJECTED,
    Outcome,
    cases,
    run_all,
    run_case,
)

XFAIL_FILE = Path(__file__).with_name("onnx_xfail.py")

# Cited explanations of cases that cannot pass for a reason other than a missing or wrong
# reference function: case name (a trailing * matches any case it starts) -> reason.
# --write-xfails prefers these to the observed outcome.
_ATTENTION_DROPS = (
    "TensorRT's ONNX parser drops the Attention node's {}: the network computes another "
    "function than the ONNX node")
EXPLAINED = {
    "test_bernoulli*": (
        "random: ONNX's expected output is one draw of numpy's generator; TensorRT's "
        "FillOperation.RANDOM_UNIFORM (IFillLayer) draws from its own generator, so no "
        "implementation can reproduce it"),
    # Measured: with upper=1 written out, the parser emits LESS instead of GREATER and the
    # case passes; without it, test_triu* and test_tril* parse to the same network.
    "test_triu*": (
        "TensorRT's ONNX parser reads a Trilu without an `upper` attribute as upper=0 (it "
        "builds the same network as for tril); ONNX's Trilu-14: `upper` \"Default is true\""),
    # Measured: the crd and dcr cases parse to identical networks; the _expanded crd case
    # (ONNX's function body) passes.
    "test_spacetodepth_crd_mode_example": (
        "TensorRT's ONNX parser ignores SpaceToDepth-28's `mode` attribute: mode=CRD parses "
        "to the same two shuffles as DCR (ONNX: \"Use CRD for column-row-depth order\")"),
    # Measured in tests/reference/test_attention_layers.py (ONNX_PARSER_DROPS; the nonpad
    # cases pass when the lengths are given to ATTENTION_INPUT directly).
    **dict.fromkeys(
        ("test_attention_4d_causal_nonpad_batch_prefill",
         "test_attention_4d_causal_nonpad_continued_prefill",
         "test_attention_4d_causal_nonpad_negative_offset_structural_empty",
         "test_attention_4d_gqa_causal_nonpad_decode",
         "test_attention_4d_gqa_causal_nonpad_decode_fp16"),
        _ATTENTION_DROPS.format("nonpad_kv_seqlen input")),
    **dict.fromkeys(
        ("test_attention_bidirectional_window", "test_attention_local_window"),
        _ATTENTION_DROPS.format("left/right window sizes")),
    # Measured in tests/reference/test_control_flow_layers.py (the executor equals the
    # recurrence the parser built, computed in float64).
    **dict.fromkeys(
        ("test_gru_batchwise", "test_lstm_batchwise", "test_simple_rnn_batchwise"),
        "TensorRT's ONNX parser ignores layout=1 (X is [batch, seq, input]): its loop "
        "iterates X over axis 0 as the sequence, carrying the state from one batch entry "
        "to the next"),
    # Measured: the reference selects the same 4 (batch, class, box) rows as ONNX, in
    # another order.
    "test_nonmaxsuppression_two_classes": (
        "row order: TensorRT's INMSLayer sorts a batch item's boxes \"by their scores without "
        "regard to class\" (NvInfer.h, class INMSLayer), so the selected rows of two "
        "classes interleave by score; ONNX's expected output lists class 0's rows, then "
        "class 1's"),
    **dict.fromkeys(
        ("test_averagepool_2d_ceil_last_window_starts_on_pad",
         "test_maxpool_2d_ceil_output_size_reduce_by_one"),
        "TensorRT's inferred shape: PaddingMode EXPLICIT_ROUND_UP gives O = ceil((I + B + A - "
        "DK) / S) + 1 (NvInfer.h, enum PaddingMode), keeping a last window that starts in "
        "the padding; ONNX MaxPool/AveragePool (opset 22 doc): \"Sliding windows that would "
        "start in the right padded region are ignored\""),
    # Measured against softmax(QK^T / sqrt(d) + causal mask) V in float64 (torch): at the
    # first differing element (0, 0, 1, 4) float64 gives 0.469190, the executor 0.468994,
    # ONNX 0.469482; over the output the executor's RMSE from float64 is 1.10e-4, ONNX's
    # expected output's 1.29e-4.
    "test_attention_4d_causal_fp16_expanded": (
        "float16 rounding: ONNX's expected output and the executor differ by 2 fp16 ulps "
        "at 2 elements, each within 1.2 ulps of float64 and the executor the closer one "
        "(RMSE from float64: executor 1.10e-4, ONNX 1.29e-4); ONNX's float16 rtol=1e-3 is "
        "about one ulp"),
}


def summarize(outcomes: list[Outcome]) -> dict:
    """Overall counts (the pass rate is over the parsed cases TensorRT's builder accepts:
    Note [Rejected by TensorRT]) and, per TensorRT layer kind, how many parsed networks use
    it and how many of those pass."""
    counts = {o: sum(x.outcome == o for x in outcomes) for o in OUTCOMES}
    parsed = len(outcomes) - counts[NOT_PARSED]
    built = parsed - counts[REJECTED]
    kinds: dict[str, dict] = defaultdict(lambda: {"networks": 0, "passed": 0})
    for x in outcomes:
        for kind in x.kinds:
            kinds[kind]["networks"] += 1
            kinds[kind]["passed"] += x.outcome == PASSED
    return {"cases": len(outcomes), "parsed": parsed, "built": built, **counts,
            "pass_rate": round(counts[PASSED] / built, 4) if built else 0.0,
            "pass_rate_of_parsed": round(counts[PASSED] / parsed, 4) if parsed else 0.0,
            "per_kind": dict(sorted(kinds.items(), key=lambda kv: (kv[1]["passed"]
                                                                   - kv[1]["networks"],
                                                                   kv[0])))}


def render_text(summary: dict) -> str:
    lines = [f"ONNX node cases: {summary['cases']}, parsed by TensorRT {summary['parsed']}, "
             f"refused by its builder {summary[REJECTED]}; passed {summary['passed']} "
             f"({summary['pass_rate']:.1%} of the {summary['built']} built, "
             f"{summary['pass_rate_of_parsed']:.1%} of parsed); failed {summary['failed']}, "
             f"error {summary['error']}, not parsed {summary['not parsed']}", "",
             f"{'layer kind':<22} {'networks':>8} {'passed':>8} {'failing':>8}"]
    for kind, k in summary["per_kind"].items():
        lines.append(f"{kind:<22} {k['networks']:>8} {k['passed']:>8} "
                     f"{k['networks'] - k['passed']:>8}")
    return "\n".join(lines)


def render_markdown(summary: dict, outcomes: list[Outcome]) -> str:
    lines = ["# Executor conformance: ONNX node cases", "",
             f"{summary['cases']} cases, {summary['parsed']} parsed by TensorRT's ONNX "
             f"parser, {summary[REJECTED]} of them refused by TensorRT's builder; "
             f"**{summary['passed']} passed ({summary['pass_rate']:.1%} of the "
             f"{summary['built']} TensorRT builds, {summary['pass_rate_of_parsed']:.1%} of "
             f"parsed)**; {summary['failed']} failed, {summary['error']} errors, "
             f"{summary['not parsed']} not parsed.", "",
             "| layer kind | networks | passed | failing |", "|---|---:|---:|---:|"]
    for kind, k in summary["per_kind"].items():
        lines.append(f"| {kind} | {k['networks']} | {k['passed']} | "
                     f"{k['networks'] - k['passed']} |")
    failing = [x for x in outcomes if x.outcome not in (PASSED, NOT_PARSED, REJECTED)]
    lines += ["", f"## Failing cases ({len(failing)})", "", "| case | outcome | reason |",
              "|---|---|---|"]
    lines += [f"| {x.name} | {x.outcome} | {_cell(x.reason)} |" for x in failing]
    changed = [x for x in outcomes if x.notes]
    lines += ["", f"## Dtypes TensorRT changed ({len(changed)} cases, compared by value)", "",
              "| case | outcome | changes |", "|---|---|---|"]
    lines += [f"| {x.name} | {x.outcome} | {_cell('; '.join(x.notes))} |" for x in changed]
    by_reason = defaultdict(list)
    for x in outcomes:
        if x.outcome == NOT_PARSED:
            by_reason[x.reason].append(x.name)
    lines += ["", f"## Not parsed ({summary['not parsed']}), by parser error", "",
              "| cases | parser error | case names |", "|---:|---|---|"]
    for reason, names in sorted(by_reason.items(), key=lambda kv: -len(kv[1])):
        lines.append(f"| {len(names)} | {_cell(reason)} | {', '.join(names)} |")
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")[:300]


def failing_with_kind(outcomes: list[Outcome], kind: str) -> list[Outcome]:
    return [x for x in outcomes if kind in x.kinds and x.outcome != PASSED]


def xfail_reason(outcome: Outcome) -> str:
    for pattern, reason in EXPLAINED.items():
        if outcome.name == pattern or (pattern.endswith("*")
                                       and outcome.name.startswith(pattern[:-1])):
            return reason
    return f"{outcome.outcome}: {outcome.reason}"[:300]


def write_xfails(outcomes: list[Outcome], path: Path = XFAIL_FILE) -> None:
    """Regenerate the strict-xfail table: every parsed case that does not pass, and the
    number of parsed cases (a floor: fewer means the parser regressed)."""
    failing = {x.name: xfail_reason(x) for x in outcomes
               if x.outcome not in (PASSED, NOT_PARSED, REJECTED)}
    rejected = sorted(x.name for x in outcomes if x.outcome == REJECTED)
    parsed = sum(x.outcome != NOT_PARSED for x in outcomes)
    body = "".join(f"    {name!r}:\n        {_literal(reason)},\n"
                   for name, reason in sorted(failing.items()))
    path.write_text(
        '"""Parsed ONNX node cases that do not pass on the reference executor: case name ->\n'
        "reason. Each is a strict xfail in conformance/test_onnx_nodes.py. Generated by\n"
        '`python -m conformance.onnx_report --write-xfails`; do not edit by hand."""\n\n'
        "# ONNX node cases TensorRT's ONNX parser parsed when this file was written\n"
        f"PARSED_AT_LEAST = {parsed}\n\n"
        f"XFAIL: dict[str, str] = {{\n{body}}}\n\n"
        "# Parsed cases TensorRT's builder refuses (Note [Rejected by TensorRT]): their test\n"
        "# checks that the executor and the builder both refuse them\n"
        f"REJECTED = {_names(rejected)}\n")


def _names(names: list[str]) -> str:
    if not names:
        return "()"
    return "(\n" + "".join(f"    {n!r},\n" for n in names) + ")"


def _literal(text: str, width: int = 84) -> str:
    """A string literal split over lines of at most ~100 columns."""
    parts = textwrap.wrap(text, width, drop_whitespace=False, break_on_hyphens=False)
    if len(parts) <= 1:
        return repr(text)
    return "(" + "\n         ".join(repr(part) for part in parts) + ")"


def _run(jobs: int) -> list[Outcome]:
    names = sorted(cases())
    done = [0]

    def progress(_outcome=None):
        done[0] += 1
        if done[0] % 250 == 0:
            print(f"  {done[0]}/{len(names)} cases", file=sys.stderr)

    if jobs <= 1:
        return run_all(names, progress)
    with multiprocessing.get_context("spawn").Pool(jobs) as pool:
        outcomes = []
        for outcome in pool.imap(run_case, names, chunksize=16):
            outcomes.append(outcome)
            progress()
    return outcomes


def _describe(outcome: Outcome) -> str:
    lines = [f"{outcome.name}: {outcome.outcome}"]
    if outcome.reason:
        lines.append(f"  reason: {outcome.reason}")
    if outcome.kinds:
        lines.append("  layer kinds: " + ", ".join(f"{k} x{n}" for k, n in
                                                    sorted(outcome.kinds.items())))
    lines += [f"  note: {n}" for n in outcome.notes]
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m conformance.onnx_report",
                                description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kind", help="list the failing cases that use this TensorRT layer kind")
    p.add_argument("--case", action="append", help="run only this case (repeatable) and "
                                                   "describe it")
    p.add_argument("--json", help="write outcomes and summary as JSON here")
    p.add_argument("--markdown", help="write the report as markdown here")
    p.add_argument("--write-xfails", action="store_true",
                   help=f"regenerate {XFAIL_FILE.name} from this run")
    p.add_argument("-j", "--jobs", type=int, default=1, help="worker processes")
    args = p.parse_args(argv)
    if args.case:
        unknown = [name for name in args.case if name not in cases()]
        if unknown:
            print(f"error: no ONNX node case named {', '.join(unknown)}", file=sys.stderr)
            return 2
        for name in args.case:
            print(_describe(run_case(name)))
        return 0
    start = time.perf_counter()
    outcomes = _run(args.jobs)
    elapsed = time.perf_counter() - start
    summary = summarize(outcomes)
    if args.kind:
        rows = failing_with_kind(outcomes, args.kind)
        used = summary["per_kind"].get(args.kind, {"networks": 0, "passed": 0})
        print(f"{args.kind}: used by {used['networks']} parsed networks, "
              f"{used['passed']} pass, {len(rows)} do not:")
        for x in rows:
            print(f"  {x.name}: {x.outcome}: {x.reason}")
    else:
        print(render_text(summary))
    print(f"\nwall time {elapsed:.1f} s ({args.jobs} process{'es' if args.jobs > 1 else ''})")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(
            {"summary": summary, "wall_seconds": round(elapsed, 1),
             "cases": [x.to_json() for x in outcomes]}, indent=1))
    if args.markdown:
        Path(args.markdown).parent.mkdir(parents=True, exist_ok=True)
        Path(args.markdown).write_text(render_markdown(summary, outcomes))
    if args.write_xfails:
        write_xfails(outcomes)
        print(f"wrote {XFAIL_FILE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
