"""``torch-trt-ref compile MODEL`` (a compile report; ``--dryrun``: the plan only) and
``torch-trt-ref debug MODEL`` (where the compiled model's error starts). MODEL is a zoo model
name or ``path/to/file.py:factory``: these commands build models from the zoo, so they live
in the zoo and reach the CLI by registration (``zoo.cli.add_subcommands``)."""

from __future__ import annotations

import argparse
import json
import sys

import torch

import torch_trt_ref
from torch_trt_ref import debug
from torch_trt_ref.accuracy import max_abs_error
from torch_trt_ref.commands import add_settings_options, check_writable, settings_from_args
from torch_trt_ref.memory import PeakRSS
from torch_trt_ref.settings import PRECISION_DTYPES

from .measure import float64_rule, references
from .registry import get
from .user_model import MODEL_HELP, is_file_spec, load


def model_entry(spec: str):
    """The zoo entry named ``spec``, or an entry for a user's ``path/to/file.py:factory``
    (``zoo.user_model``)."""
    if is_file_spec(spec):
        return load(spec)
    return get(spec)


def model_help() -> str:
    return MODEL_HELP


def _compile_command(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    torch_trt_ref.CompilationSettings.from_kwargs(dryrun=args.dryrun, **settings)  # fail early
    check_writable(args.json, "--json")
    entry = model_entry(args.model)
    model = entry.factory()
    inputs, kwargs = entry.inputs()
    print(f"{'planning' if args.dryrun else 'compiling'} {entry.name}: {entry.description}",
          file=sys.stderr)
    with PeakRSS() as rss:
        compiled = torch_trt_ref.compile(model, inputs, kwargs, dryrun=args.dryrun, **settings)
    report = compiled.compile_report
    if args.dryrun:
        print(f"model: {entry.name}, precision {args.precision}, partitioner "
              f"{args.partitioner}")
        print(report.render())
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"model": entry.name, **report.to_json()}, f, indent=1, default=str)
        return 0
    report.peak_rss_bytes = rss.above_baseline
    with torch.no_grad():
        expected = model(*inputs, **kwargs)
        actual = compiled(*inputs, **kwargs)
    error = max_abs_error(actual, expected)
    tolerance = entry.tolerances.get(args.precision)
    eager, eager64, notes = references(model, inputs, kwargs,
                                       PRECISION_DTYPES[args.precision], expected)
    accuracy = float64_rule(actual, eager, eager64, error, tolerance, notes)
    weights = entry.weight_bytes(model)
    print(f"model: {entry.name} ({weights / 2**20:.1f} MiB of fp32 weights), "
          f"precision {args.precision}, partitioner {args.partitioner}")
    print(report.render())
    print(f"executor: {', '.join(sorted(set(report.executors.values()))) or 'none'}")
    print(f"max abs error vs eager fp32: {error:.3g}")
    if accuracy["rule"] == "float64":
        print(f"accuracy vs eager float64: RMSE {accuracy['compiled_rmse']:.3g}, eager "
              f"{args.precision} {accuracy['eager_rmse']:.3g} (ratio "
              f"{accuracy['ratio']:.2f}, allowed {accuracy['allowed']:.3g}): "
              + ("passes" if accuracy["passed"] else f"FAILS -- {accuracy['message']}"))
    else:
        print(f"accuracy: no float64 run ({'; '.join(accuracy['notes'])}): max abs error "
              + ("within" if accuracy["passed"] else "OVER") + f" the tolerance {tolerance}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"model": entry.name, "max_abs_error": error, "accuracy": accuracy,
                       **report.to_json()}, f, indent=1, default=str)
    return 0 if accuracy["passed"] else 1


def _debug_command(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)  # before the model is built: a bad option fails at once
    check_writable(args.json, "--json")
    entry = model_entry(args.model)
    model = entry.factory()
    inputs, kwargs = entry.inputs()
    settings = {**entry.compile_settings, **settings, "progress": False}
    print(f"debugging {entry.name}: {entry.description}", file=sys.stderr)
    report = debug.compare(model, inputs, kwargs, **settings)
    print(f"model: {entry.name}, precision {args.precision}, partitioner {args.partitioner}")
    print(report.render(all_nodes=args.all))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report.to_json(), f, indent=1, default=str)
    if args.reduce and not report.passed:
        reduced = debug.reduce(model, inputs, kwargs, out_dir=args.out, report=report,
                               **settings)
        print(reduced.render())
    return 0 if report.passed else 1


def add_subcommands(sub) -> None:
    """Register ``compile`` and ``debug`` on the ``torch-trt-ref`` subparsers ``sub``."""
    c = sub.add_parser("compile", help="compile a zoo model or your own and print its "
                                       "report (--dryrun: the plan, nothing built)")
    c.add_argument("model", help=model_help())
    add_settings_options(c)
    c.add_argument("--dryrun", action="store_true",
                   help="lower and partition only: print the segments, per-op support with "
                        "reasons, what min_block_size sent to PyTorch, and the estimated "
                        "engines and their weights; nothing is converted or built")
    c.add_argument("--json", default=None, help="also write the report as JSON here")
    c.set_defaults(func=_compile_command)
    d = sub.add_parser("debug", help="find the first FX node whose compiled value leaves the "
                                     "float64 rule (layer-wise divergence finder)")
    d.add_argument("model", help=model_help())
    add_settings_options(d, min_block_size=None)
    d.add_argument("--all", action="store_true", help="list every node, not only the "
                                                      "neighbourhood of the first divergence")
    d.add_argument("--reduce", action="store_true", help="shrink a failing model to the "
                   "smallest failing subgraph and write a standalone repro script")
    d.add_argument("--out", default="torch_trt_ref_repro", help="directory of the repro "
                                                                  "(with --reduce)")
    d.add_argument("--json", default=None, help="also write the report as JSON here")
    d.set_defaults(func=_debug_command)
