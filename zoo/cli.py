"""``torch-trt-ref zoo run|report|compare|list``: ``add_subcommands`` registers them on the
main CLI; ``python -m zoo ...`` runs the same commands on their own."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from torch_trt_ref.commands import check_writable, number
from torch_trt_ref.settings import COMPILE_PRECISIONS, PARTITIONERS, QUANT_FORMATS

from . import compare as cmp
from . import model_commands
from .matrix import DEFAULT_BUDGET_FRACTION, full_matrix, matrix, quick_matrix
from .registry import ZOO, select

RP_CHOICES = {"off": (False,), "on": (True,), "both": (False, True)}
QUICK_MEASURE = {"warmup": 1, "runs": 5, "max_seconds": 5.0}
FULL_MEASURE = {"warmup": 2, "runs": 10, "max_seconds": 20.0}


def _cells(args: argparse.Namespace):
    if args.quick:
        return quick_matrix()
    if args.full and not (args.models or args.tags):
        cells = full_matrix()
    else:
        names = [e.name for e in select(args.models, args.tags)]
        if args.tags and not names:
            tags = sorted({t for e in ZOO.values() for t in e.tags})
            raise ValueError(f"--tags {' '.join(args.tags)}: no zoo model has any of these "
                             f"tags; tags: {', '.join(tags)}")
        cells = matrix(names, args.strategies or PARTITIONERS,
                       args.precisions or COMPILE_PRECISIONS,
                       RP_CHOICES[args.rp or ("both" if args.full else "off")],
                       args.budget_fraction, args.dynamic)
    return cells


def _default_out(args: argparse.Namespace) -> str:
    return "out/zoo_quick.jsonl" if args.quick else (
        "out/zoo_full.jsonl" if args.full else "out/zoo.jsonl")


def run_command(args: argparse.Namespace) -> int:
    if args.backend == "torch_tensorrt":
        return _run_peer(args)
    from .harness import sweep
    from .schema import read_records

    cells = _cells(args)
    out = Path(args.out or _default_out(args))
    if out.exists() and args.resume:
        done = {r["cell"]["key"] for r in read_records(out)}
        cells = [c for c in cells if c.key not in done]
    elif out.exists():
        out.unlink()
    print(f"zoo: {len(cells)} cells -> {out}", file=sys.stderr)
    defaults = QUICK_MEASURE if args.quick else FULL_MEASURE
    measure = {k: defaults[k] if getattr(args, k) is None else getattr(args, k)
               for k in defaults}
    if args.ray or args.ray_address:
        from .ray_runner import sweep_on_ray

        sweep_on_ray(cells, out, timeout=args.timeout, measure=measure,
                     progress=not args.no_progress, on_record=_print_failure,
                     address=args.ray_address, num_cpus=args.ray_cpus)
    else:
        sweep(cells, out, timeout=args.timeout, isolation=args.isolation, measure=measure,
              progress=not args.no_progress, on_record=_print_failure)
    records = read_records(out)
    anchor = None
    if args.partition_anchor or (args.full and not args.no_partition_anchor):
        anchor = _measure_partition_anchor(out.with_suffix(".partition_anchor.json"))
    if not args.no_report:
        _write_reports(records, out.with_suffix(".md"), out.with_suffix(".html"), anchor)
    from .report import anchor_section

    print("\n".join(["Ratios vs the anchor (fp32):", *anchor_section(records)]))
    failed = [r for r in records if r["status"] != "ok"]
    print(f"zoo: {len(records) - len(failed)}/{len(records)} cells ok", file=sys.stderr)
    return 1 if failed and args.fail_on_error else 0


def _run_peer(args: argparse.Namespace) -> int:
    """``--backend torch_tensorrt``: the cells through Torch-TensorRT beside ours
    (``zoo/peer_run.py``); needs the peer's environment."""
    if args.full or args.tags or args.strategies or args.rp or args.dynamic or args.ray:
        raise ValueError("--backend torch_tensorrt runs --quick or --models with "
                         "--precisions fp32/fp16 (strategy fast, static shapes) only")
    from .peer_run import ours_python, peer_cells, run_side_by_side

    python = ours_python(args.ours_python)
    cells = peer_cells(None if args.quick else args.models, args.precisions)
    out = Path(args.out or "out/zoo_peer.jsonl")
    print(f"zoo: {len(cells)} cells through ours and Torch-TensorRT -> {out}", file=sys.stderr)
    pairs = run_side_by_side(cells, out, python, progress=not args.no_progress)
    print(out.with_suffix(".md").read_text())
    failed = [r for pair in pairs for r in pair if r["status"] != "ok"]
    return 1 if failed and args.fail_on_error else 0


def _print_failure(record: dict) -> None:
    if record["status"] != "ok":
        e = record["error"]
        first = (e.get("message") or "").strip().splitlines()[:1]
        print(f"\n  {record['cell']['key']}: {record['status']} at {e['stage']}: {e['type']}: "
              f"{first[0][:160] if first else ''}", file=sys.stderr)


def _measure_partition_anchor(path: Path) -> list:
    """The partition anchor rows (partition only, a few minutes), also written to ``path``."""
    import json

    from .partition_anchor import measure, to_json

    print("zoo: partition anchor (engines beside Torch-TensorRT's, partition only)",
          file=sys.stderr)
    rows = measure(None, lambda line: print(line, file=sys.stderr))
    path.write_text(json.dumps(to_json(rows), indent=1) + "\n")
    print(f"zoo: wrote {path}", file=sys.stderr)
    return rows


def _read_partition_anchor(path: str) -> list:
    import json

    from .partition_anchor import from_json

    try:
        return from_json(json.loads(Path(path).read_text()))
    except (OSError, ValueError, TypeError) as err:
        raise ValueError(f"--partition-anchor {path}: {err}; expected the JSON written by "
                         "`zoo anchors --json` or `zoo run --full`") from None


def _write_reports(records, md_path: Path | None, html_path: Path | None,
                   partition_anchor: list | None = None) -> None:
    from .html import write_html
    from .report import markdown

    if md_path is not None:
        md_path.write_text(markdown(records, partition_anchor=partition_anchor))
        print(f"zoo: wrote {md_path}", file=sys.stderr)
    if html_path is not None:
        write_html(records, html_path, partition_anchor=partition_anchor)
        print(f"zoo: wrote {html_path} (+ plots as PNG next to it)", file=sys.stderr)


def report_command(args: argparse.Namespace) -> int:
    from .gpu_latency import gpu_section, split_records
    from .report import markdown
    from .schema import read_records

    check_writable(args.markdown, "--markdown")
    check_writable(args.html, "--html")
    records, gpu = split_records(read_records(args.records))
    anchor = _read_partition_anchor(args.partition_anchor) if args.partition_anchor else None
    if records and not args.markdown and not args.html:
        print(markdown(records, partition_anchor=anchor))
    if gpu:  # `zoo latency` records: their own table
        print(gpu_section(gpu))
    if records:
        _write_reports(records, Path(args.markdown) if args.markdown else None,
                       Path(args.html) if args.html else None, anchor)
    return 0


def compare_command(args: argparse.Namespace) -> int:
    from .schema import read_records

    thresholds = cmp.Thresholds(args.time_threshold, args.memory_threshold, args.min_seconds,
                                int(args.min_mib * 2**20))
    deltas = cmp.compare(read_records(args.base), read_records(args.new), thresholds,
                         args.counts_only, args.strict)
    print(cmp.render(deltas, args.all))
    bad = cmp.regressions(deltas)
    if bad:
        print(f"\n{len(bad)} failing delta(s) (REGRESSED, changed or MISSING) vs {args.base}",
              file=sys.stderr)
    return 1 if bad else 0


def list_command(args: argparse.Namespace) -> int:
    for entry in ZOO.values():
        print(f"{entry.name:22s} {','.join(entry.tags):32s} {entry.description}")
    return 0


def anchors_command(args: argparse.Namespace) -> int:
    from .partition_anchor import markdown, measure, peer_models

    unknown = [m for m in args.models or () if m not in peer_models()]
    if unknown:
        raise ValueError(f"--models: {', '.join(unknown)} not among the anchor models: "
                         f"{', '.join(peer_models())}")
    check_writable(args.markdown, "--markdown")
    check_writable(args.json, "--json")
    print("Partition anchor: engines and transitions per strategy, min_block_size=5 "
          "(partition only)", file=sys.stderr)
    rows = measure(args.models, lambda line: print(line, file=sys.stderr), args.precision)
    table = markdown(rows)
    if args.markdown:
        Path(args.markdown).write_text(table + "\n")
    if args.json:
        import json

        from .partition_anchor import to_json

        Path(args.json).write_text(json.dumps(to_json(rows), indent=1) + "\n")
    print(table)
    return 0


def add_subcommands(subparsers) -> None:
    """Register ``zoo`` with its ``run``, ``report``, ``compare`` and ``list`` commands on an
    argparse subparsers object, and the zoo's model commands ``compile`` and ``debug``
    (``zoo.model_commands``); each sets ``func(args) -> exit code``."""
    if "compile" not in subparsers.choices:
        model_commands.add_subcommands(subparsers)
    zoo = subparsers.add_parser("zoo", help="model-zoo harness: run, report, compare, list, "
                                "anchors")
    sub = zoo.add_subparsers(dest="zoo_command", required=True, metavar="ZOO_COMMAND",
                             help="one of the commands below; ZOO_COMMAND --help for its "
                                  "options")

    run = sub.add_parser("run", help="compile zoo models over strategies x precisions")
    which = run.add_mutually_exclusive_group()
    which.add_argument("--quick", action="store_true",
                       help="CI subset: 8 small models, fp32/fp16, and the text models with "
                       "dynamic sequence length (zoo.matrix.quick_matrix)")
    which.add_argument("--full", action="store_true",
                       help="every model x strategy x resource partitioning x precision")
    run.add_argument("--backend", choices=("torch_trt_ref", "torch_tensorrt"),
                     default="torch_trt_ref",
                     help="torch_tensorrt: each cell also compiled by Torch-TensorRT itself "
                     "(its networks run on our reference executor), partitions, layers and "
                     "accuracy beside ours in one table; run in the peer's environment "
                     "(../shared/peer/setup.sh), docs/zoo.md")
    run.add_argument("--ours-python", metavar="PYTHON",
                     help="with --backend torch_tensorrt: the python of this project's "
                     "environment, which runs our side (default $TORCH_TRT_REF_PYTHON)")
    run.add_argument("--models", nargs="+", choices=sorted(ZOO), metavar="MODEL",
                     help="zoo models to run (torch-trt-ref zoo list)")
    run.add_argument("--tags", nargs="+", help="models with any of these tags")
    run.add_argument("--strategies", nargs="+", choices=PARTITIONERS,
                     help="partition strategies (default: all)")
    run.add_argument("--precisions", nargs="+", choices=COMPILE_PRECISIONS + QUANT_FORMATS,
                     help="compile precisions (default: fp32/fp16/bf16); int8 and fp8 "
                          "quantize Linear/Conv first (docs/quantization.md)")
    run.add_argument("--rp", choices=sorted(RP_CHOICES),
                     help="resource partitioning cells (default: off; both with --full)")
    run.add_argument("--budget-fraction", type=number(float, high=1.0),
                     default=DEFAULT_BUDGET_FRACTION,
                     help="per-engine budget as a fraction of the weights (rp cells)")
    run.add_argument("--dynamic", action="store_true", help="compile with dynamic Input specs")
    run.add_argument("--out", help="JSON-lines output (default out/zoo_{quick,full}.jsonl)")
    run.add_argument("--resume", action="store_true", help="skip cells already in --out")
    run.add_argument("--timeout", type=number(float), default=900.0, help="seconds per cell")
    run.add_argument("--warmup", type=number(int, low_included=True),
                     help="untimed runs (default 1 quick, 2 otherwise)")
    run.add_argument("--runs", type=number(int),
                     help="timed runs per cell, at most (5 quick, 10)")
    run.add_argument("--max-seconds", type=number(float),
                     help="stop timing after this long, at least 3 runs (5 quick, 20)")
    run.add_argument("--isolation", choices=("fork", "subprocess", "none"), default="subprocess",
                     help="subprocess: a new interpreter per cell (default; faithful compile "
                     "times); fork: from a preloaded forkserver (faster sweeps, compiles "
                     "~0.5-1 s slower); none: in this process (debugging, RSS not isolated)")
    run.add_argument("--ray", action="store_true",
                     help="run every cell as a Ray task (a fresh worker process each) on a "
                     "local Ray instance started for the sweep (needs the [ray] extra)")
    run.add_argument("--ray-address", metavar="ADDRESS",
                     help="join an existing Ray cluster instead: auto, or ray://HOST:10001 "
                     "(implies --ray)")
    run.add_argument("--ray-cpus", type=number(int), metavar="N",
                     help="CPUs of the local Ray instance (default: all of this machine)")
    run.add_argument("--no-progress", action="store_true",
                     help="no per-cell progress lines on stderr")
    run.add_argument("--no-report", action="store_true", help="skip the .md/.html reports")
    run.add_argument("--partition-anchor", action="store_true",
                     help="also measure the partition anchor table (engines beside "
                     "Torch-TensorRT's; a few minutes) into the report; on with --full")
    run.add_argument("--no-partition-anchor", action="store_true",
                     help="with --full: leave the partition anchor table out")
    run.add_argument("--fail-on-error", action="store_true",
                     help="exit 1 when any cell failed (default: failures are data)")
    run.set_defaults(func=run_command)

    anc = sub.add_parser("anchors", help="partition anchor table: engines and transitions "
                         "per strategy and forced op beside Torch-TensorRT's (no engine built)")
    anc.add_argument("--models", nargs="+", help="subset of the anchor models")
    anc.add_argument("--precision", default="fp32", choices=("fp32", *QUANT_FORMATS),
                     help="quantize each model first (int8/fp8/nvfp4, as zoo run does): "
                          "quantization must not add engines")
    anc.add_argument("--markdown", help="also write the table here")
    anc.add_argument("--json", help="also write the rows here (for zoo report "
                     "--partition-anchor)")
    anc.set_defaults(func=anchors_command)

    rep = sub.add_parser("report", help="markdown/HTML report of JSON-lines records")
    rep.add_argument("records", nargs="+", help="JSON-lines files written by zoo run")
    rep.add_argument("--markdown", help="write markdown here (default: print it)")
    rep.add_argument("--html", help="write the HTML report (with plots) here")
    rep.add_argument("--partition-anchor", metavar="JSON",
                     help="include the partition anchor table written by zoo anchors --json "
                     "(or zoo run --full)")
    rep.set_defaults(func=report_command)

    c = sub.add_parser("compare", help="delta table of two sweeps; exit 1 on a regression")
    c.add_argument("base", help="JSON-lines records of the baseline sweep")
    c.add_argument("new", help="JSON-lines records of the sweep to judge")
    c.add_argument("--counts-only", action="store_true",
                   help="only status, partition and op counts (machine-independent)")
    c.add_argument("--strict", action="store_true",
                   help="any change of a count fails, improvements included")
    c.add_argument("--time-threshold", type=number(float), default=cmp.Thresholds.time,
                   help="new/base time ratio that fails")
    c.add_argument("--memory-threshold", type=number(float), default=cmp.Thresholds.memory,
                   help="new/base memory ratio that fails")
    c.add_argument("--min-seconds", type=number(float, low_included=True),
                   default=cmp.Thresholds.min_seconds,
                   help="times below this are noise")
    c.add_argument("--min-mib", type=number(float, low_included=True),
                   default=cmp.Thresholds.min_bytes / 2**20,
                   help="memory below this is noise")
    c.add_argument("--all", action="store_true", help="show unchanged metrics too")
    c.set_defaults(func=compare_command)

    lst = sub.add_parser("list", help="the zoo's models")
    lst.set_defaults(func=list_command)

    from .gpu_latency import add_parsers  # zoo save / zoo latency (saved programs on a GPU)
    from .llm_cells import add_parser as add_llm_parser  # zoo llm (decoder-LLM cells)

    add_parsers(sub)
    add_llm_parser(sub)


def main(argv: list[str] | None = None) -> int:
    from torch_trt_ref.commands import run_reporting_errors

    parser = argparse.ArgumentParser(prog="python -m zoo")
    add_subcommands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["zoo", *(argv if argv is not None else sys.argv[1:])])
    return run_reporting_errors(args.func, args)
