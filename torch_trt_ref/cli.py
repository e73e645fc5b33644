"""The ``torch-trt-ref`` command: ``compile MODEL`` prints a compile report (``--dryrun``:
the plan only); ``debug MODEL`` finds where the compiled model's error starts (MODEL: a zoo
model name or ``path/to/file.py:factory``); ``onnx MODEL.onnx`` runs an ONNX model, parsed
by TensorRT's ONNX parser, on the reference executor; ``zoo run|report|compare|list|anchors``
drive the model-zoo harness. Errors are one line on stderr and exit code 2."""

from __future__ import annotations

import argparse
import json
import os
import sys

import torch


def model_entry(spec: str):
    """The zoo entry named ``spec``, or an entry for a user's ``path/to/file.py:factory``
    (``zoo.user_model``)."""
    from zoo.user_model import is_file_spec, load

    if is_file_spec(spec):
        return load(spec)
    from zoo.registry import get

    return get(spec)


def _compile_command(args: argparse.Namespace) -> int:
    import torch_trt_ref
    from torch_trt_ref.memory import PeakRSS

    settings = _settings(args)
    torch_trt_ref.CompilationSettings.from_kwargs(dryrun=args.dryrun, **settings)  # fail early
    _check_writable(args.json, "--json")
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
    from torch_trt_ref.settings import PRECISION_DTYPES
    from zoo.measure import float64_rule, references

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


def _settings(args: argparse.Namespace) -> dict:
    """Compile settings from the options ``_add_settings_options`` defines."""
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


def _check_writable(path: str | None, option: str) -> None:
    """An output file's directory must exist before minutes of compiling, not after."""
    folder = os.path.dirname(os.path.abspath(path)) if path else None
    if folder and not os.path.isdir(folder):
        raise ValueError(f"{option} {path}: no directory {folder}; create it or choose another "
                       "path")


def _debug_command(args: argparse.Namespace) -> int:
    from torch_trt_ref import debug

    settings = _settings(args)  # before the model is built: a bad option fails at once
    _check_writable(args.json, "--json")
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


# Tolerances of `onnx --compare` against onnxruntime: ONNX's backend-test rtol, with an
# atol for real models (ONNX's 1e-7 is meant for its small hand-made node cases).
ONNX_COMPARE_RTOL, ONNX_COMPARE_ATOL = 1e-3, 1e-5


def _onnx_command(args: argparse.Namespace) -> int:
    from torch_trt_ref.runtime.network import describe_inputs, parse_onnx, run_network

    snapshot = parse_onnx(args.model).snapshot()  # OnnxParseError is a ValueError
    print(f"{args.model}: {len(snapshot.layers)} TensorRT layers; inputs "
          f"{describe_inputs(snapshot.inputs)}")
    print("layer kinds: " + ", ".join(f"{k} x{n}" for k, n in sorted(snapshot.kinds().items())))
    try:
        inputs = _onnx_inputs(args.inputs, snapshot.inputs, args.seed)
        outputs = run_network(snapshot, inputs)
    except (TypeError, NotImplementedError) as err:  # wrong input dtype, missing kind
        print(f"error: {err}", file=sys.stderr)
        return 2
    for name, value in outputs.items():
        print(f"output {name}: {tuple(value.shape)} {str(value.dtype).removeprefix('torch.')} "
              f"{_stats(value)}")
    if not args.compare:
        return 0
    try:
        import onnxruntime
    except ImportError:
        print("error: --compare needs onnxruntime, which is not installed "
              "(pip install onnxruntime)", file=sys.stderr)
        return 3
    session = onnxruntime.InferenceSession(args.model, providers=["CPUExecutionProvider"])
    expected = session.run(list(outputs), {k: v.numpy() for k, v in inputs.items()})
    worst = 0
    for (name, value), ref in zip(outputs.items(), expected):
        ok = value.shape == ref.shape and torch.allclose(
            value.double(), torch.from_numpy(ref).double(), rtol=ONNX_COMPARE_RTOL,
            atol=ONNX_COMPARE_ATOL, equal_nan=True)
        print(f"onnxruntime {name}: " + ("matches" if ok else "DIFFERS") +
              f" (rtol {ONNX_COMPARE_RTOL:g}, atol {ONNX_COMPARE_ATOL:g})")
        worst = worst or (0 if ok else 1)
    return worst


def _onnx_inputs(source: str, infos, seed: int) -> dict:
    """Inputs from an .npz file (arrays named like the network inputs) or random ones
    ("random": normal floats, integers in [0, 10), random bools; dynamic dims of size 1)."""
    if source != "random":
        import numpy as np

        with np.load(source) as data:
            return {name: torch.from_numpy(data[name]) for name in data.files}
    gen = torch.Generator().manual_seed(seed)
    inputs = {}
    for info in infos:
        shape = [d if d >= 0 else 1 for d in info.shape]
        if isinstance(info.dtype, str):
            raise TypeError(f"input {info.name}: no random values of TensorRT type "
                            f"{info.dtype}")
        if info.dtype.is_floating_point:
            inputs[info.name] = torch.randn(shape, generator=gen).to(info.dtype)
        elif info.dtype == torch.bool:
            inputs[info.name] = torch.randint(0, 2, shape, generator=gen).bool()
        else:
            inputs[info.name] = torch.randint(0, 10, shape, generator=gen).to(info.dtype)
    return inputs


def _stats(value: torch.Tensor) -> str:
    if value.numel() == 0:
        return "(empty)"
    v = value.double()
    finite = v[v.isfinite()]
    text = (f"min {finite.min().item():.6g} max {finite.max().item():.6g} "
            f"mean {finite.mean().item():.6g}" if finite.numel() else "no finite values")
    bad = value.numel() - finite.numel()
    return text + (f", {bad} NaN/inf" if bad else "")


def max_abs_error(actual, expected) -> float:
    flat_a = torch.utils._pytree.tree_leaves(actual)
    flat_e = torch.utils._pytree.tree_leaves(expected)
    if len(flat_a) != len(flat_e):
        raise AssertionError(f"compiled module returned {len(flat_a)} values, eager "
                             f"{len(flat_e)}")
    worst = 0.0
    for a, e in zip(flat_a, flat_e):
        if isinstance(e, torch.Tensor) and e.is_floating_point():
            worst = max(worst, (a.float() - e.float()).abs().max().item() if e.numel() else 0.0)
    return worst


def _add_settings_options(p: argparse.ArgumentParser, min_block_size: int | None = 5) -> None:
    """The compile settings both ``compile`` and ``debug`` take."""
    from torch_trt_ref.settings import EXECUTORS, PARTITIONERS, PRECISIONS

    p.add_argument("--precision", choices=PRECISIONS, default="fp32",
                   help="compile precision: weights and activations cast in lowering "
                        "(default fp32)")
    p.add_argument("--partitioner", choices=PARTITIONERS, default="fast",
                   help="partition strategy (docs/partitioning.md; default fast)")
    p.add_argument("--executor", choices=EXECUTORS, default="auto",
                   help="what runs the engines: tensorrt (a supported GPU), reference "
                        "(torch ops, any device) or auto (default)")
    p.add_argument("--min-block-size", type=int, default=min_block_size,
                   help="TensorRT segments with fewer compute nodes run in PyTorch "
                        + (f"(default {min_block_size})" if min_block_size is not None
                           else "(default: the zoo entry's, else 5)"))
    p.add_argument("--torch-executed-ops", nargs="*", metavar="OP",
                   help="ops forced to PyTorch, e.g. aten::add or aten.add.Tensor")
    p.add_argument("--resource-partitioning", action="store_true",
                   help="split TensorRT segments whose engines would not fit "
                        "--cpu-memory-budget")
    p.add_argument("--cpu-memory-budget", type=int, default=None,
                   help="bytes of CPU memory for building (each engine gets a quarter); "
                        "default: the available memory")
    p.add_argument("--cache", action="store_true",
                   help="reuse engines from the engine cache (and store new ones there)")
    p.add_argument("--cache-dir", default=None,
                   help="engine cache directory (implies --cache; default "
                        "$TORCH_TRT_REF_CACHE_DIR or ~/.cache/torch_trt_ref/engines)")


def model_help() -> str:
    from zoo.user_model import MODEL_HELP

    return MODEL_HELP


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="torch-trt-ref", description=__doc__)
    parser.add_argument("--traceback", action="store_true",
                        help="on an error, show the full Python traceback instead of one line")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                help="one of the commands below; COMMAND --help for its "
                                     "options")
    c = sub.add_parser("compile", help="compile a zoo model or your own and print its "
                                       "report (--dryrun: the plan, nothing built)")
    c.add_argument("model", help=model_help())
    _add_settings_options(c)
    c.add_argument("--dryrun", action="store_true",
                   help="lower and partition only: print the segments, per-op support with "
                        "reasons, what min_block_size sent to PyTorch, and the estimated "
                        "engines and their weights; nothing is converted or built")
    c.add_argument("--json", default=None, help="also write the report as JSON here")
    c.set_defaults(func=_compile_command)
    d = sub.add_parser("debug", help="find the first FX node whose compiled value leaves the "
                                     "float64 rule (layer-wise divergence finder)")
    d.add_argument("model", help=model_help())
    _add_settings_options(d, min_block_size=None)
    d.add_argument("--all", action="store_true", help="list every node, not only the "
                                                      "neighbourhood of the first divergence")
    d.add_argument("--reduce", action="store_true", help="shrink a failing model to the "
                   "smallest failing subgraph and write a standalone repro script")
    d.add_argument("--out", default="torch_trt_ref_repro", help="directory of the repro "
                                                                  "(with --reduce)")
    d.add_argument("--json", default=None, help="also write the report as JSON here")
    d.set_defaults(func=_debug_command)
    o = sub.add_parser("onnx", help="run an ONNX model, parsed by TensorRT's ONNX parser, on "
                                     "the reference executor")
    o.add_argument("model", help="path of the .onnx file")
    o.add_argument("--inputs", default="random",
                   help='an .npz of the inputs by name, or "random" (default)')
    o.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    o.add_argument("--compare", action="store_true",
                   help="also run onnxruntime (CPU) and compare the outputs")
    o.set_defaults(func=_onnx_command)
    for add_subcommands in registered_commands():
        add_subcommands(sub)
    return parser


COMMAND_GROUP = "torch_trt_ref.commands"


def registered_commands() -> list:
    """The ``add_subcommands(subparsers)`` functions that packages above the library (the
    zoo, perf, conformance) register under the entry-point group ``torch_trt_ref.commands``
    in their ``pyproject.toml``, so the library's CLI never imports them by name."""
    from importlib.metadata import entry_points

    return [e.load() for e in sorted(entry_points(group=COMMAND_GROUP), key=lambda e: e.name)]


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    return run_reporting_errors(args.func, args, getattr(args, "traceback", False))


def run_reporting_errors(func, args, traceback: bool = False) -> int:
    """``func(args)``; an exception becomes one line on stderr and exit code 2 (the
    traceback only with ``--traceback``)."""
    try:
        return func(args)
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


if __name__ == "__main__":
    raise SystemExit(main())
