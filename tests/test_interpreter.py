"""The FX interpreter builds a real, strongly typed TensorRT network in node order."""

import pytest
import torch

import torch_trt_ref
from torch_trt_ref import CompilationSettings
from torch_trt_ref._trt import trt
from torch_trt_ref.build import build_engine
from torch_trt_ref.conversion.interpreter import ConversionError, Interpreter
from torch_trt_ref.conversion.registry import converter
from torch_trt_ref.conversion.shapes import TensorSpec
from torch_trt_ref.runtime.module import EngineModule
from torch_trt_ref.runtime.reference.executor import run_snapshot

aten = torch.ops.aten


def _graph_module():
    """y = relu(x + w) with w a weight (get_attr), traced by hand with meta vals."""
    root = torch.nn.Module()
    root.w = torch.nn.Parameter(torch.tensor([1.0, -2.0, 3.0]))
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    x.meta["val"] = torch.empty(2, 3)
    w = graph.get_attr("w")
    w.meta["val"] = torch.empty(3)
    s = graph.call_function(aten.add.Tensor, (x, w))
    s.meta["val"] = torch.empty(2, 3)
    r = graph.call_function(aten.relu.default, (s,))
    r.meta["val"] = torch.empty(2, 3)
    graph.output(r)
    return torch.fx.GraphModule(root, graph)


def test_network_layers_follow_node_order_and_names():
    gm = _graph_module()
    spec = TensorSpec("x", torch.float32, (2, 3), (2, 3), (2, 3))
    net = Interpreter(gm, [spec], CompilationSettings()).run()
    kinds = [net.net.get_layer(i).type for i in range(net.net.num_layers)]
    assert kinds == [trt.LayerType.CONSTANT, trt.LayerType.ELEMENTWISE,
                     trt.LayerType.ACTIVATION]
    assert net.net.get_layer(1).name.startswith("add_tensor/")
    assert net.converters_used == {"aten.add.Tensor": 1, "aten.relu.default": 1}
    assert net.ctx.refit_map == {"w": [net.net.get_layer(0).name]}


def test_built_engine_snapshot_runs_to_hand_derived_values():
    gm = _graph_module()
    spec = TensorSpec("x", torch.float32, (2, 3), (2, 3), (2, 3))
    engine = build_engine(Interpreter(gm, [spec], CompilationSettings()).run(),
                          CompilationSettings())
    assert len(engine.plan) > 0 and engine.layer_count == 3
    x = torch.tensor([[0.0, 0.0, 0.0], [-2.0, 3.0, -4.0]])
    (out,) = run_snapshot(engine.snapshot, {"x": x})
    # relu(x + [1, -2, 3]) computed by hand
    assert torch.equal(out, torch.tensor([[1.0, 0.0, 3.0], [0.0, 1.0, 0.0]]))
    # the snapshot shares the parameter's storage instead of copying it
    constant = engine.snapshot.layers[0].attrs["weights"]
    assert constant.data_ptr() == gm.w.data_ptr()


def test_dynamic_input_becomes_minus_one_dim_with_profile():
    gm = _graph_module()
    spec = TensorSpec("x", torch.float32, (1, 3), (2, 3), (5, 3))
    net = Interpreter(gm, [spec], CompilationSettings(assume_dynamic_shape_support=True)).run()
    assert tuple(net.net.get_input(0).shape) == (-1, 3)
    engine = build_engine(net, CompilationSettings())
    for rows in (1, 5):
        x = torch.randn(rows, 3)
        (out,) = run_snapshot(engine.snapshot, {"x": x})
        assert torch.allclose(out, torch.relu(x + gm.w.detach()))


def test_converter_failure_names_node_and_op(registry):
    @converter(aten.relu.default, priority=100, registry=registry)
    def broken(ctx, input):
        raise RuntimeError("boom")

    spec = TensorSpec("x", torch.float32, (2, 3), (2, 3), (2, 3))
    message = "aten.relu.default failed on node relu_default.*boom"
    with pytest.raises(ConversionError, match=message):
        Interpreter(_graph_module(), [spec], CompilationSettings(), registry).run()


class Tied(torch.nn.Module):
    """An embedding whose weight is also the output projection (GPT-2's tied head)."""

    def __init__(self, vocab: int, hidden: int):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, hidden)
        self.proj = torch.nn.Linear(hidden, hidden)
        self.head = torch.nn.Linear(hidden, vocab, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, ids):
        return self.head(torch.relu(self.proj(self.emb(ids))))


def test_weights_are_stored_once_linear_reads_them_transposed_and_tied_weights_share():
    """nn.Linear's weight enters the network untransposed (matrix multiply TRANSPOSE) and a
    weight used by an embedding and a tied output projection becomes one constant layer."""
    model = Tied(16, 4).eval()
    ids = torch.tensor([[1, 2, 3]])
    compiled = torch_trt_ref.compile(model, [ids], min_block_size=1)
    (engine,) = [m.engine for _, m in compiled.named_modules() if isinstance(m, EngineModule)]
    param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())  # tied: once
    assert engine.snapshot.weight_bytes() == param_bytes
    matmuls = [layer for layer in engine.snapshot.layers if layer.kind == "MATRIX_MULTIPLY"]
    assert len(matmuls) == 2 and all(m.attrs["op1"] == "TRANSPOSE" for m in matmuls)
    torch.testing.assert_close(compiled(ids), model(ids), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_tied_weights_are_cast_once_under_reduced_precision(precision):
    """The embedding and the transposed head are two views of one weight; cast to the target
    precision they stay views of one cast tensor, so the network holds the weight once."""
    model = Tied(16, 4).eval()
    ids = torch.tensor([[1, 2, 3]])
    compiled = torch_trt_ref.compile(model, [ids], min_block_size=1, precision=precision)
    (engine,) = [m.engine for _, m in compiled.named_modules() if isinstance(m, EngineModule)]
    param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())  # tied: once
    assert engine.snapshot.weight_bytes() == param_bytes // 2
    torch.testing.assert_close(compiled(ids), model(ids), atol=0.05, rtol=0.05)


def test_tied_weight_with_unaligned_rows_is_stored_once_in_the_plan():
    """5001 rows (not a multiple of 8): TensorRT would pad the head's copy and store the
    weight twice (plan ~2x the weights); split_tied_embeddings keeps the plan near 1x. Ids
    from the last rows exercise the tail lookup and the tail product."""
    model = Tied(5001, 256).eval()
    ids = torch.tensor([[0, 1, 4999, 5000, 4991, 4992, 17]])
    compiled = torch_trt_ref.compile(model, [ids], min_block_size=1)
    (engine,) = [m.engine for _, m in compiled.named_modules() if isinstance(m, EngineModule)]
    param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    assert engine.nbytes < 1.3 * param_bytes
    torch.testing.assert_close(compiled(ids), model(ids), atol=1e-4, rtol=1e-4)
