"""The strategies' promises on the quick zoo models with one op forced to PyTorch
(min_block_size=5, the converter library as it is): dependency_aware <= fast, global <=
both. Lowering and partitioning only, no engine is built. mobilenet_v2, llama and qwen2
run with TORCH_TRT_REF_OPINFO=full."""

import os

import pytest

import torch_trt_ref as ttr
from torch_trt_ref.capture import capture
from torch_trt_ref.compiler import lower_program
from torch_trt_ref.partitioning import partition
from torch_trt_ref.partitioning.global_partition import objective
from zoo import registry

from .support import check_invariants

FULL = os.environ.get("TORCH_TRT_REF_OPINFO") == "full"
MODELS = ["resnet18", "bert_2layer", "gpt2_2layer", "t5_2layer"] + (
    ["mobilenet_v2", "llama_2layer", "qwen2_2layer"] if FULL else [])
FORCED = ["aten.add.Tensor", "aten.gelu.default", "aten.native_layer_norm.default",
          "aten.mul.Tensor"]


@pytest.fixture(scope="module", params=MODELS)
def lowered(request):
    entry = registry.get(request.param)
    args, kwargs = entry.inputs()
    return lower_program(capture(entry.factory(), args, kwargs), ttr.CompilationSettings())


@pytest.mark.parametrize("forced", FORCED)
def test_strategy_order(lowered, forced):
    settings = ttr.CompilationSettings(min_block_size=5, torch_executed_ops={forced})
    results = {name: partition(lowered, settings, strategy=name)
               for name in ("fast", "dependency_aware", "global")}
    for result in results.values():
        check_invariants(lowered, result, settings)
    fast, dep, best = (results[n] for n in ("fast", "dependency_aware", "global"))
    assert dep.count("tensorrt") <= fast.count("tensorrt")
    assert len(dep.segments) <= len(fast.segments)
    for other in (fast, dep):
        assert objective(best.segments) <= objective(other.segments)
        if objective(best.segments)[0] == objective(other.segments)[0]:
            assert best.count("tensorrt") <= other.count("tensorrt")
