"""TorchScript frontend and module fallback: scripted and traced torchvision models compile
and equal eager (float64 rule), and ``torch_executed_modules`` keeps the listed submodules
in PyTorch on the TorchScript and the nn.Module paths, with the reason in the report."""

from __future__ import annotations

import copy
import functools
import warnings

import pytest
import torch
import torchvision

import torch_trt_ref
from torch_trt_ref import torchscript
from torch_trt_ref.accuracy import judge, to_float64
from torch_trt_ref.partitioning import TORCH

BLOCK = "torchvision.models.resnet.BasicBlock"
# The nodes of one BasicBlock without downsample after lowering: two convolutions and
# batch norms (each norm with its getitem), two relus and the residual add.
BLOCK_OPS = {"aten.convolution.default": 2, "aten._native_batch_norm_legit_no_training.default": 2,
             "operator.getitem": 2, "aten.relu.default": 2, "aten.add.Tensor": 1}


@functools.cache
def resnet():
    """(model, input, eager output, float64 eager output), built once."""
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval()
    x = torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        return model, x, model(x), copy.deepcopy(model).double()(*to_float64((x,)))


def scripted(kind: str):
    model, x, _, _ = resnet()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch.jit is deprecated upstream
        return torch.jit.script(model) if kind == "script" else torch.jit.trace(model, x)


def rejected_ops(compiled) -> dict[str, dict[str, int]]:
    """Per op, the reasons its nodes were not given to TensorRT (the compile report)."""
    return compiled.compile_report.support.get("reasons", {})


def compile_torchscript(kind: str, kept: list[str]):
    """resnet18 scripted or traced, compiled with ``kept`` in torch_executed_modules: within
    the float64 rule of eager, through the TorchScript frontend."""
    model, x, eager, eager64 = resnet()
    compiled = torch_trt_ref.compile(scripted(kind), (x,), torch_executed_modules=kept)
    with torch.no_grad():
        verdict = judge(compiled(x), eager, eager64)
    assert verdict.passed, verdict.message
    assert compiled.compile_report.frontend == torchscript.ROUTE
    return compiled


def test_scripted_resnet18_equals_eager_with_one_block_kept_by_path():
    """A scripted model, one block named by its path: exactly that block's nodes run in
    PyTorch (two convs, two norms, two relus, the add), the rest in one engine."""
    compiled = compile_torchscript("script", ["layer1.0"])
    report = compiled.compile_report
    why = "inside torch_executed_modules module layer1.0 (BasicBlock)"
    counts = {op: r[why] for op, r in rejected_ops(compiled).items() if why in r}
    assert counts == BLOCK_OPS
    assert len(report.engines) == 1 and report.counts.get("tensorrt") == 1


def test_traced_resnet18_equals_eager_with_a_type_kept_by_qualified_name():
    """A traced model (TorchScript mangles its type names; the frontend strips that): the
    average pool, named by qualified type, runs in PyTorch, everything before it in one
    engine."""
    compiled = compile_torchscript("trace", ["torch.nn.modules.pooling.AdaptiveAvgPool2d"])
    report = compiled.compile_report
    [(op, reasons)] = [(op, r) for op, r in rejected_ops(compiled).items()
                       if any("torch_executed_modules" in why for why in r)]
    assert op.startswith(("aten.mean", "aten.adaptive_avg_pool2d", "aten.avg_pool2d"))
    assert reasons == {"inside torch_executed_modules module avgpool (AdaptiveAvgPool2d)": 1}
    assert len(report.engines) == 1
    assert rejected_ops(compiled).get("aten.convolution.default") is None  # all in TensorRT


def test_torch_executed_modules_by_type_keeps_every_block_in_pytorch():
    """nn.Module path, all eight BasicBlocks by qualified type name: their nodes run in
    PyTorch with the block's path in the reason; the stem (conv1, bn1, relu, maxpool) and
    the head (avgpool, flatten, fc) are outside every block and stay TensorRT-capable."""
    model, x, eager, eager64 = resnet()
    compiled = torch_trt_ref.compile(model, (x,), torch_executed_modules=[BLOCK],
                                     min_block_size=1)
    with torch.no_grad():
        verdict = judge(compiled(x), eager, eager64)
    assert verdict.passed, verdict.message
    reasons = rejected_ops(compiled)
    blocks = [f"layer{i}.{j}" for i in range(1, 5) for j in range(2)]
    conv_reasons = reasons["aten.convolution.default"]
    assert set(conv_reasons) == {f"inside torch_executed_modules module {b} (BasicBlock)"
                                 for b in blocks}
    # 19 convolutions: 16 in blocks + 3 downsample convs, which are inside blocks too
    assert sum(conv_reasons.values()) == 19
    support = compiled.compile_report.support
    assert support["supported"].get("aten.convolution.default", 0) == 1  # the stem's conv1
    rejected = compiled.partition_result.rejected
    assert rejected["convolution_1"] == ("inside torch_executed_modules module layer1.0 "
                                         "(BasicBlock)")
    assert all(s.target == TORCH for s in compiled.partition_result.segments
               if any(n.name == "convolution_1" for n in s.nodes))


def test_bad_torch_executed_modules_entry_is_a_clear_error():
    with pytest.raises(ValueError, match=r"torch_executed_modules: 3 is not accepted; give "
                                         r"nn.Module classes, type names"):
        torch_trt_ref.CompilationSettings(torch_executed_modules=[3])
    settings = torch_trt_ref.CompilationSettings(
        torch_executed_modules=[torchvision.models.resnet.BasicBlock, "layer1.0"])
    assert settings.torch_executed_modules == {BLOCK, "layer1.0"}


def test_torchscript_takes_positional_inputs_only():
    small = torch.jit.script(torch.nn.Linear(4, 4))
    with pytest.raises(ValueError, match="a TorchScript model takes its inputs positionally"):
        torch_trt_ref.compile(small, kwarg_inputs={"input": torch.randn(2, 4)})


def test_scripted_function_compiles():
    @torch.jit.script
    def fn(x, y):
        return torch.relu(x @ y) + 1.0

    x, y = torch.randn(3, 4), torch.randn(4, 5)
    compiled = torch_trt_ref.compile(fn, (x, y), min_block_size=1)
    assert compiled.compile_report.counts == {"tensorrt": 1}
    x64, y64 = x.double(), y.double()
    verdict = judge(compiled(x, y), fn(x, y), torch.relu(x64 @ y64) + 1.0)
    assert verdict.passed, verdict.message
