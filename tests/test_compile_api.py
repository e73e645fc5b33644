"""compile(): same calling convention as the model, clear errors, fallbacks, executors."""

import pytest
import torch
from transformers.modeling_outputs import BaseModelOutput

import torch_trt_ref
from torch_trt_ref import Input
from torch_trt_ref._trt import trt
from torch_trt_ref.compiler import SegmentCompilationError
from torch_trt_ref.conversion.registry import converter
from torch_trt_ref.partitioning import UnsupportedOperatorError
from torch_trt_ref.runtime.module import EngineModule

aten = torch.ops.aten


class Structured(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.bias = torch.nn.Parameter(torch.tensor([0.5, -0.5, 1.0]))

    def forward(self, x, y):
        a = torch.relu(x + y + self.bias)
        return {"a": a, "pair": (a + x, y)}


class WithModelOutput(torch.nn.Module):
    def forward(self, x):
        return BaseModelOutput(last_hidden_state=torch.relu(x + x))


class WithLgamma(torch.nn.Module):
    def forward(self, x):
        return torch.lgamma(torch.relu(x + 1)) + x + torch.lgamma(x + 2)


def test_returns_graph_module_with_same_output_structure():
    x, y = torch.randn(2, 3), torch.randn(2, 3)
    model = Structured()
    compiled = torch_trt_ref.compile(model, (x, y), min_block_size=1)
    assert isinstance(compiled, torch.fx.GraphModule)
    out, ref = compiled(x, y), model(x, y)
    assert set(out) == {"a", "pair"} and isinstance(out["pair"], tuple)
    torch.testing.assert_close(out["a"], ref["a"])
    torch.testing.assert_close(out["pair"][0], ref["pair"][0])
    torch.testing.assert_close(out["pair"][1], ref["pair"][1])
    assert torch_trt_ref.executors_used(compiled) == {"_run_on_tensorrt_0": "reference"}
    assert compiled.compile_report.executors == {"_run_on_tensorrt_0": "reference"}


def test_transformers_model_output_is_preserved():
    x = torch.randn(2, 4)
    compiled = torch_trt_ref.compile(WithModelOutput(), (x,), min_block_size=1)
    out = compiled(x)
    assert isinstance(out, BaseModelOutput)
    torch.testing.assert_close(out.last_hidden_state, torch.relu(2 * x))


def test_user_model_is_not_changed():
    model = Structured().train()
    before = model.bias.detach().clone()
    torch_trt_ref.compile(model, (torch.randn(2, 3), torch.randn(2, 3)), min_block_size=1,
                          precision="fp16")
    assert model.training and all(m.training for m in model.modules())
    assert model.bias.dtype == torch.float32 and torch.equal(model.bias.detach(), before)


def test_require_full_compilation_names_each_unsupported_op_and_count():
    with pytest.raises(UnsupportedOperatorError) as info:
        torch_trt_ref.compile(WithLgamma(), (torch.rand(2, 3),), require_full_compilation=True)
    message = str(info.value)
    assert "aten.lgamma.default: 2 nodes" in message
    assert "no converter for aten.lgamma.default" in message


def test_unsupported_ops_run_in_pytorch_and_results_match():
    x = torch.rand(2, 3)
    compiled = torch_trt_ref.compile(WithLgamma(), (x,), min_block_size=1)
    counts = compiled.compile_report.counts
    assert counts["torch"] >= 1 and counts["tensorrt"] >= 1
    torch.testing.assert_close(compiled(x), WithLgamma()(x))


def _broken_relu_registry(registry):
    @converter(aten.relu.default, priority=100, registry=registry)
    def reshape_to_wrong_size(ctx, input):  # a network TensorRT refuses to build
        layer = ctx.net.add_shuffle(input)
        layer.reshape_dims = (7,)
        return layer.get_output(0)

    return registry


def test_failed_engine_build_falls_back_to_pytorch_with_warning(registry):
    x, y = torch.randn(2, 3), torch.randn(2, 3)
    with pytest.warns(UserWarning, match="runs in PyTorch"):
        compiled = torch_trt_ref.compile(Structured(), (x, y), min_block_size=1,
                                         registry=_broken_relu_registry(registry))
    assert "_run_on_tensorrt_0" in compiled.compile_report.fallbacks
    assert not isinstance(compiled._run_on_tensorrt_0, EngineModule)
    torch.testing.assert_close(compiled(x, y)["a"], Structured()(x, y)["a"])


def test_failed_engine_build_is_an_error_under_full_compilation(registry):
    with pytest.raises(SegmentCompilationError, match="_run_on_tensorrt_0"):
        torch_trt_ref.compile(Structured(), (torch.randn(2, 3), torch.randn(2, 3)),
                              require_full_compilation=True,
                              registry=_broken_relu_registry(registry))


def test_dynamic_input_range_and_out_of_range_error():
    spec = Input(min_shape=(2, 3), opt_shape=(4, 3), max_shape=(8, 3))
    compiled = torch_trt_ref.compile(Structured(), (spec, spec), min_block_size=1)
    engine = compiled._run_on_tensorrt_0
    assert engine.engine.inputs[0].trt_shape == (-1, 3)
    for rows in (2, 5, 8):
        x, y = torch.randn(rows, 3), torch.randn(rows, 3)
        torch.testing.assert_close(compiled(x, y)["a"], Structured()(x, y)["a"])
    with pytest.raises(ValueError, match="outside the compiled range"):
        engine(torch.randn(9, 3), torch.randn(9, 3))


def test_tensorrt_executor_where_it_cannot_run_is_a_clear_error():
    if torch.cuda.is_available():
        pytest.xfail("this machine has a GPU; the error path is for CPU-only machines")
    with pytest.raises(RuntimeError, match="executor='reference'"):
        torch_trt_ref.compile(Structured(), (torch.randn(2, 3), torch.randn(2, 3)),
                              executor="tensorrt")


@pytest.mark.parametrize("precision,dtype,tol", [("fp16", torch.float16, 1e-2),
                                                  ("bf16", torch.bfloat16, 5e-2)])
def test_reduced_precision_computes_in_that_dtype_and_returns_callers_dtype(precision, dtype,
                                                                           tol):
    x, y = torch.randn(2, 3), torch.randn(2, 3)
    compiled = torch_trt_ref.compile(Structured(), (x, y), min_block_size=1,
                                     precision=precision)
    snapshot = compiled._run_on_tensorrt_0.engine.snapshot
    dtypes = {info.dtype for layer in snapshot.layers for info in layer.outputs}
    assert dtype in dtypes  # the network really computes in the reduced precision
    out = compiled(x, y)
    assert out["a"].dtype == torch.float32
    torch.testing.assert_close(out["a"], Structured()(x, y)["a"], atol=tol, rtol=tol)


def test_network_is_strongly_typed():
    compiled = torch_trt_ref.compile(Structured(), (torch.randn(2, 3), torch.randn(2, 3)),
                                     min_block_size=1)
    assert compiled._run_on_tensorrt_0.engine.backend in ("tensorrt", "tensorrt_rtx")
    assert trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED is not None


def test_compile_leaves_the_garbage_collector_as_it_found_it():
    import gc

    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()).eval()
    x = torch.randn(2, 4)
    assert gc.get_freeze_count() == 0
    torch_trt_ref.compile(model, [x], min_block_size=1)
    assert gc.get_freeze_count() == 0 and gc.isenabled()
    gc.freeze()
    try:
        torch_trt_ref.compile(model, [x], min_block_size=1)
        assert gc.get_freeze_count() > 0  # the caller's frozen objects stay frozen
    finally:
        gc.unfreeze()


class _PassThrough(torch.nn.Module):
    """Engines whose outputs are an input as TensorRT's network passes it on."""

    def forward(self, x):
        return torch.cat([x]), torch.nn.functional.pixel_shuffle(x, 1), x * 2


@pytest.mark.parametrize("batch", [0, 1])
def test_an_engine_passing_an_input_through_returns_new_tensors(batch):
    # The engine runs as the custom op torch_trt_ref::execute_engine, whose outputs may not
    # share storage with its inputs (torch checks by storage object, empty tensors too: the
    # OpInfo samples of cat and pixel_shuffle with an empty batch raised at run time).
    x = torch.randn(batch, 4, 2, 2)
    compiled = torch_trt_ref.compile(_PassThrough(), [x], min_block_size=1)
    assert compiled.compile_report.counts["tensorrt"] == 1
    assert not compiled.compile_report.counts.get("torch")
    outputs = compiled(x)
    for got, want in zip(outputs, _PassThrough()(x)):
        assert torch.equal(got, want)
        assert got.untyped_storage()._cdata != x.untyped_storage()._cdata
