"""Shared by the repro scripts: compile ``module`` with Torch-TensorRT, run it, print
eager, the engine's output and the expected values, exit 1 when the engine is wrong.

On a GPU the engine is Torch-TensorRT's own. On a machine without one (where the bugs were
found) the peer's own pipeline and converters build the network and our reference executor
runs it in place of the engine (``conformance/peer.py``, DESIGN.md D16): run the script with
the Torch-TensorRT environment's Python (``../shared/peer/setup.sh``); this checkout is
put on the path."""

import sys
from pathlib import Path

import torch

if torch.cuda.is_available():
    import torch_tensorrt

    DEVICE = "cuda"

    def _compile(ep, inputs):
        return torch_tensorrt.dynamo.compile(ep, arg_inputs=inputs, min_block_size=1)
else:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from conformance.peer import compile_program as _compile  # patches the GPU steps first

    DEVICE = "cpu"


def check(module, inputs, expected, atol=1e-3):
    inputs = [x.to(DEVICE) for x in inputs]
    module = module.eval().to(DEVICE)
    ep = torch.export.export(module, tuple(inputs))
    trt = _compile(ep, inputs)
    eager, got = module(*inputs), trt(*inputs)
    print("eager:   ", eager.cpu())
    where = "" if DEVICE == "cuda" else "(the peer's network on our reference executor)"
    print("TensorRT:", got.cpu(), where)
    print("expected:", expected)
    ok = got.shape == expected.shape and torch.allclose(got.cpu().float(), expected.float(),
                                                         atol=atol, equal_nan=True)
    print("OK" if ok else "BUG: the engine differs from the expected values")
    sys.exit(0 if ok else 1)
