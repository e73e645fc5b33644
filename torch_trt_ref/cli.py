"""The ``torch-trt-ref`` command: ``onnx MODEL.onnx`` runs an ONNX model, parsed by
TensorRT's ONNX parser, on the reference executor; the commands of the packages above the
library are registered (entry-point group ``torch_trt_ref.commands``): the zoo's
``compile MODEL`` (a compile report; ``--dryrun``: the plan only), ``debug MODEL`` (where
the compiled model's error starts; MODEL: a zoo model name or ``path/to/file.py:factory``)
and ``zoo run|report|compare|list|anchors``. Errors are one line on stderr and exit code 2
(``torch_trt_ref.commands``)."""

from __future__ import annotations

import argparse
import sys

import torch

from .commands import error_line, run_reporting_errors  # noqa: F401  (the CLI's API)
from .llm.command import add_llm_command

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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="torch-trt-ref", description=__doc__)
    parser.add_argument("--traceback", action="store_true",
                        help="on an error, show the full Python traceback instead of one line")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                help="one of the commands below; COMMAND --help for its "
                                     "options")
    o = sub.add_parser("onnx", help="run an ONNX model, parsed by TensorRT's ONNX parser, on "
                                     "the reference executor")
    o.add_argument("model", help="path of the .onnx file")
    o.add_argument("--inputs", default="random",
                   help='an .npz of the inputs by name, or "random" (default)')
    o.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    o.add_argument("--compare", action="store_true",
                   help="also run onnxruntime (CPU) and compare the outputs")
    o.set_defaults(func=_onnx_command)
    add_llm_command(sub)
    for add_subcommands in registered_commands():
        add_subcommands(sub)
    return parser


COMMAND_GROUP = "torch_trt_ref.commands"


def registered_commands() -> list:
    """The ``add_subcommands(subparsers)`` functions that packages above the library (the
    zoo, perf, conformance) register under the entry-point group ``torch_trt_ref.commands``
    in their ``pyproject.toml``, so the library's CLI never imports them by name. An entry
    that cannot load in this environment (a package it needs is missing) is skipped with a
    one-line note on stderr."""
    from importlib.metadata import entry_points

    found = []
    for entry in sorted(entry_points(group=COMMAND_GROUP), key=lambda e: e.name):
        try:
            found.append(entry.load())
        except ImportError as err:  # e.g. perf without scipy: the other commands still work
            print(f"torch-trt-ref: the '{entry.name}' commands are unavailable here "
                  f"({type(err).__name__}: {err})", file=sys.stderr)
    return found


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    return run_reporting_errors(args.func, args, getattr(args, "traceback", False))


if __name__ == "__main__":
    raise SystemExit(main())
