"""CompilationSettings and Input validate on construction with errors naming the fix."""

import pytest
import torch

import torch_trt_ref
from torch_trt_ref import CompilationSettings, Input
from torch_trt_ref.settings import matches_op

aten = torch.ops.aten


def test_defaults_are_valid_and_frozen():
    s = CompilationSettings()
    assert s.precision == "fp32" and s.partitioner == "fast" and s.min_block_size == 5
    with pytest.raises(Exception):
        s.precision = "fp16"


@pytest.mark.parametrize("kwargs,needle", [
    ({"precision": "fp8"}, "['fp32', 'fp16', 'bf16']"),
    ({"partitioner": "greedy"}, "dependency_aware"),
    ({"executor": "gpu"}, "reference"),
    ({"min_block_size": -1}, "non-negative"),
    ({"cpu_memory_budget": -5}, "positive"),
    ({"torch_executed_ops": ["aten::lgamma_typo"]}, "aten::add"),
])
def test_bad_settings_name_what_is_accepted(kwargs, needle):
    with pytest.raises(ValueError, match=None) as info:
        CompilationSettings(**kwargs)
    assert needle in str(info.value)


def test_unknown_setting_name_suggests_the_right_one():
    with pytest.raises(ValueError) as info:
        CompilationSettings.from_kwargs(min_blok_size=3)
    assert "min_block_size" in str(info.value)


def test_torch_executed_ops_accepts_all_spellings():
    s = CompilationSettings(torch_executed_ops=[aten.add.Tensor, aten.mul, "aten::relu",
                                                "aten.sub.Tensor"])
    assert s.torch_executed_ops == {"aten.add.Tensor", "aten.mul", "aten.relu",
                                    "aten.sub.Tensor"}
    assert matches_op(aten.mul.Scalar, s.torch_executed_ops)  # packet covers overloads
    assert matches_op(aten.relu.default, s.torch_executed_ops)
    assert not matches_op(aten.add.Scalar, s.torch_executed_ops)


def test_resource_partitioning_budget_defaults_to_available_memory():
    s = CompilationSettings(enable_resource_partitioning=True)
    assert s.cpu_memory_budget > 0 and s.engine_memory_budget == s.cpu_memory_budget // 4


def test_input_validation():
    assert Input(shape=(1, 3)).min_shape == (1, 3)
    dyn = Input(min_shape=(1, 3), opt_shape=(2, 3), max_shape=(4, 3))
    assert dyn.is_dynamic and dyn.dynamic_dims == [0]
    with pytest.raises(ValueError, match="min <= opt <= max"):
        Input(min_shape=(4, 3), opt_shape=(2, 3), max_shape=(8, 3))
    with pytest.raises(ValueError, match="all of min_shape"):
        Input(min_shape=(1, 3), max_shape=(4, 3))
    with pytest.raises(ValueError, match="either shape"):
        Input(shape=(1,), min_shape=(1,), opt_shape=(1,), max_shape=(1,))


@pytest.mark.parametrize("precision", ["int8", "fp8", "nvfp4"])
def test_a_quantization_format_as_compile_precision_points_to_quantize(precision):
    """Issue 36 item 4: INT8/FP8/NVFP4 are put in the model by torch_trt_ref.quantize before
    compile; the error says so, and still lists the compile precisions."""
    with pytest.raises(ValueError, match=rf"precision='{precision}' is not accepted; use one "
                       rf"of \['fp32', 'fp16', 'bf16'\]. '{precision}' is a quantization "
                       rf"format, .*torch_trt_ref.quantize\(model, calibration_batches, "
                       rf"precision='{precision}'\), then compile\(quantized, ...\) .*"
                       rf"`zoo run --precisions {precision}` does both"):
        torch_trt_ref.compile(torch.nn.Linear(2, 2).eval(), (torch.randn(1, 2),),
                              precision=precision)


@pytest.mark.parametrize("kwargs, hint", [
    ({"precision": "fp61"}, "(did you mean 'fp16'?)"),
    ({"precision": "FP16"}, "(did you mean 'fp16'?)"),
    ({"partitioner": "dependency-aware"}, "(did you mean 'dependency_aware'?)"),
    ({"executor": "refrence"}, "(did you mean 'reference'?)"),
])
def test_a_misspelt_choice_names_the_closest(kwargs, hint):
    with pytest.raises(ValueError) as info:
        CompilationSettings(**kwargs)
    assert str(info.value).endswith(hint)
