"""What every ``torch-trt-ref`` command shares, the library's and the registered ones of the
harness: the compile-settings options and their reading, the early check of an output path,
and the reporting of errors (one line on stderr, exit code 2)."""

from __future__ import annotations

import argparse
import os
import sys

from .settings import COMPILE_PRECISIONS, EXECUTORS, PARTITIONERS


def add_settings_options(p: argparse.ArgumentParser, min_block_size: int | None = 5) -> None:
    """The compile settings both ``compile`` and ``debug`` take."""
    p.add_argument("--precision", choices=COMPILE_PRECISIONS, default="fp32",
                   help="compile precision: weights and activations cast in lowering "
                        "(default fp32; INT8/FP8/NVFP4 are quantization formats: "
                        "zoo run --precisions int8, or torch_trt_ref.quantize)")
    p.add_argument("--partitioner", choices=PARTITIONERS, default="fast",
                   help="partition strategy (docs/partitioning.md; default fast)")
    p.add_argument("--executor", choices=EXECUTORS, default="auto",
                   help="what runs the engines: tensorrt (a supported GPU), reference "
                        "(torch ops, any device) or auto (default)")
    p.add_argument("--min-block-size", type=number(int, low_included=True),
                   default=min_block_size,
                   help="TensorRT segments with fewer compute nodes run in PyTorch "
                        + (f"(default {min_block_size})" if min_block_size is not None
                           else "(default: the zoo entry's, else 5)"))
    p.add_argument("--torch-executed-ops", nargs="*", metavar="OP",
                   help="ops forced to PyTorch, e.g. aten::add or aten.add.Tensor")
    p.add_argument("--resource-partitioning", action="store_true",
                   help="split TensorRT segments whose engines would not fit "
                        "--cpu-memory-budget")
    p.add_argument("--cpu-memory-budget", type=number(int), default=None,
                   help="bytes of CPU memory for building (each engine gets a quarter); "
                        "default: the available memory")
    p.add_argument("--cache", action="store_true",
                   help="reuse engines from the engine cache (and store new ones there)")
    p.add_argument("--cache-dir", default=None,
                   help="engine cache directory (implies --cache; default "
                        "$TORCH_TRT_REF_CACHE_DIR or ~/.cache/torch_trt_ref/engines)")


def settings_from_args(args: argparse.Namespace) -> dict:
    """Compile settings from the options ``add_settings_options`` defines."""
    settings = dict(precision=args.precision, partitioner=args.partitioner,
                    min_block_size=args.min_block_size, executor=args.executor,
                    torch_executed_ops=args.torch_executed_ops or (),
                    enable_resource_partitioning=args.resource_partitioning, progress=True)
    if args.min_block_size is None:  # debug: the zoo entry's or the default
        del settings["min_block_size"]
    if args.cpu_memory_budget:
        settings["cpu_memory_budget"] = args.cpu_memory_budget
    if args.cache_dir and os.path.exists(args.cache_dir) and not os.path.isdir(args.cache_dir):
        raise ValueError(f"--cache-dir {args.cache_dir}: is a file; give a directory (created "
                       "when missing)")
    if args.cache or args.cache_dir:
        settings.update(cache_engines=True, engine_cache_dir=args.cache_dir)
    return settings


def number(kind: type = float, low: float = 0.0, low_included: bool = False,
           high: float | None = None):
    """An argparse ``type`` for a number of ``kind`` above ``low`` (or at it, with
    ``low_included``) and at most ``high``: a mistake is argparse's error naming the
    option ("argument --timeout: -1 is not a number > 0"), before anything runs."""
    bound = (f">= {low:g}" if low_included else f"> {low:g}") + (
        f" and <= {high:g}" if high is not None else "")
    noun = "an integer" if kind is int else "a number"

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {noun} {bound}") from None
        if value != value or value < low or (value == low and not low_included) or (
                high is not None and value > high):
            raise argparse.ArgumentTypeError(f"{text} is not {noun} {bound}")
        return value

    parse.__name__ = kind.__name__  # argparse names the type in some messages
    return parse


def check_writable(path: str | None, option: str) -> None:
    """An output file's directory must exist before minutes of compiling, not after."""
    folder = os.path.dirname(os.path.abspath(path)) if path else None
    if folder and not os.path.isdir(folder):
        raise ValueError(f"{option} {path}: no directory {folder}; create it or choose another "
                       "path")


def run_reporting_errors(func, args, traceback: bool = False) -> int:
    """``func(args)``; an exception becomes one line on stderr and exit code 2, Ctrl-C
    "interrupted" and exit code 130 (the traceback only with ``--traceback``)."""
    try:
        return func(args)
    except KeyboardInterrupt:  # the command has said what it stopped and what it kept
        if traceback:
            raise
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as err:  # noqa: BLE001  (every error of a command is reported)
        if traceback:
            raise
        print(f"error: {error_line(err)}", file=sys.stderr)
        return 2


def error_line(err: Exception) -> str:
    """The message of ``err`` for a user: the text of the errors we raise on purpose as
    is, an OS error as "path: reason", anything else with its type and a hint."""
    if isinstance(err, KeyError) and err.args:
        return str(err.args[0])
    if isinstance(err, OSError) and err.filename is not None:
        return f"{err.filename}: {err.strerror or err}"
    if isinstance(err, (ValueError, TypeError, OSError)):
        return str(err)
    return f"{type(err).__name__}: {err} (rerun with --traceback for the full traceback)"
