"""Shared by the repro scripts: compile ``module`` with Torch-TensorRT, run it, print
eager, the engine's output and the expected values, exit 1 when the engine is wrong (or
when Torch-TensorRT raises compiling a graph its support check accepted, or the engine
raises running it).

On a GPU the engine is Torch-TensorRT's own. On a machine without one (where the bugs were
found) the peer's own pipeline and converters build the network and our reference executor
runs it in place of the engine (``conformance/peer.py``, DESIGN.md D16): run the script with
the Torch-TensorRT environment's Python (``../shared/peer/setup.sh``); this checkout is
put on the path.

Dynamic shapes: ``dynamic`` gives, per input, ``{dim: torch.export.Dim(name, min=, max=)}``
(or None for a static input). The program is exported with those Dims as
``dynamic_shapes`` and compiled with ``torch_tensorrt.Input(min_shape, opt_shape,
max_shape)``: the Dims' min and max, the example input's shape as opt. ``run`` gives the
inputs eager and the engine run on (shapes inside the ranges; default: the example)."""

import sys
from pathlib import Path

import torch
import torch.fx.experimental._config as fx_config

if torch.cuda.is_available():
    import torch_tensorrt

    DEVICE = "cuda"

    def _compile(ep, inputs):
        return torch_tensorrt.dynamo.compile(ep, arg_inputs=inputs, min_block_size=1)

    def _input(lo, opt, hi, dtype):
        if lo == opt == hi:
            return torch_tensorrt.Input(shape=opt, dtype=dtype)
        return torch_tensorrt.Input(min_shape=lo, opt_shape=opt, max_shape=hi, dtype=dtype)
else:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from conformance.peer import compile_program as _compile  # patches the GPU steps first
    from conformance.peer import peer_input as _input

    DEVICE = "cpu"


def _outputs(value) -> list:
    return list(value) if isinstance(value, (tuple, list)) else [value]


def _export(module, inputs, dynamic):
    """torch.export of ``module``; with ``dynamic``, the Dims as dynamic_shapes and the
    Input ranges they declare. A Dim whose min is 0 or 1 is exported size-oblivious (torch
    otherwise assumes every dynamic size is >= 2), as the conformance suite does."""
    if dynamic is None:
        return torch.export.export(module, tuple(inputs)), list(inputs)
    oblivious = any(d.min < 2 for dims in dynamic if dims for d in dims.values())
    with fx_config.patch(backed_size_oblivious=oblivious):
        ep = torch.export.export(module, tuple(inputs), dynamic_shapes=tuple(dynamic),
                                 strict=False)
    specs = []
    for x, dims in zip(inputs, dynamic):
        lo, hi = list(x.shape), list(x.shape)
        for d, dim in (dims or {}).items():
            lo[d], hi[d] = dim.min, dim.max
        specs.append(_input(tuple(lo), tuple(x.shape), tuple(hi), x.dtype))
    return ep, specs


def check(module, inputs, expected, atol=1e-3, *, dynamic=None, run=None):
    inputs = [x.to(DEVICE) for x in inputs]
    run = inputs if run is None else [x.to(DEVICE) for x in run]
    module = module.eval().to(DEVICE)
    ep, specs = _export(module, inputs, dynamic)
    if dynamic is not None:
        print("compiled for", ", ".join(
            f"min {tuple(s.shape['min_shape'])} opt {tuple(s.shape['opt_shape'])} max "
            f"{tuple(s.shape['max_shape'])}" if isinstance(s.shape, dict) else str(s.shape)
            for s in specs), "; run at", [tuple(x.shape) for x in run])
    eager = module(*run)
    print("eager:   ", eager.cpu() if isinstance(eager, torch.Tensor) else
          [e.cpu() for e in eager])
    where = "" if DEVICE == "cuda" else "(the peer's network on our reference executor)"
    try:
        trt = _compile(ep, specs)
    except Exception as err:
        print(f"Torch-TensorRT's compile raised {type(err).__name__}: {err}")
        print("expected:", expected)
        print("BUG: Torch-TensorRT accepted the graph, then failed to compile it")
        sys.exit(1)
    try:
        got = trt(*run)
    except Exception as err:
        print(f"TensorRT: raised {type(err).__name__}: {str(err).splitlines()[0]}", where)
        print("expected:", expected)
        print("BUG: the engine fails at this shape")
        sys.exit(1)
    print("TensorRT:", got.cpu() if isinstance(got, torch.Tensor) else [g.cpu() for g in got],
          where)
    print("expected:", expected)
    got, expected = _outputs(got), _outputs(expected)
    ok = len(got) == len(expected) and all(
        g.shape == e.shape and torch.allclose(g.cpu().float(), e.float(), atol=atol,
                                              equal_nan=True)
        for g, e in zip(got, expected))
    print("OK" if ok else "BUG: the engine differs from the expected values")
    sys.exit(0 if ok else 1)
