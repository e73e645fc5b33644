"""Shared by the repro scripts: compile ``module`` with Torch-TensorRT on the GPU, print
eager, the engine's output and the expected values, exit 1 when the engine is wrong."""

import sys

import torch
import torch_tensorrt


def check(module, inputs, expected, atol=1e-3):
    inputs = [x.cuda() for x in inputs]
    module = module.eval().cuda()
    ep = torch.export.export(module, tuple(inputs))
    trt = torch_tensorrt.dynamo.compile(ep, arg_inputs=inputs, min_block_size=1)
    eager, got = module(*inputs), trt(*inputs)
    print("eager:   ", eager.cpu())
    print("TensorRT:", got.cpu())
    print("expected:", expected)
    ok = torch.allclose(got.cpu().float(), expected.float(), atol=atol)
    print("OK" if ok else "BUG: the engine differs from the expected values")
    sys.exit(0 if ok else 1)
