"""The snapshot of a TensorRT network (every input, dependency order, unknown kinds) and
``torch_trt_ref.run_network`` on networks parsed from small ONNX models; expected values
are worked out by hand or with numpy."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from torch_trt_ref._trt import make_logger, trt
from torch_trt_ref.runtime import snapshot as snapshot_module
from torch_trt_ref.runtime.snapshot import take_snapshot


@pytest.fixture
def net():
    builder = trt.Builder(make_logger())
    yield builder.create_network(0)  # the builder outlives the network


def _i64(net, values):
    return net.add_constant((len(values),), np.array(values, dtype=np.int64)).get_output(0)


def _layer(snap, kind):
    (layer,) = [r for r in snap.layers if r.kind == kind]
    return layer


def test_snapshot_records_inputs_set_after_creation(net):
    x = net.add_input("x", trt.float32, (2, 3, 4))
    sl = net.add_slice(x, (0, 0, 0), (1, 1, 1), (1, 1, 1))
    size, axes = _i64(net, [1, 2, 3]), _i64(net, [0, 1, 2])
    sl.set_input(2, size)
    sl.set_input(5, axes)
    fill = net.add_fill((2, 3), trt.FillOperation.LINSPACE, trt.float32)
    alpha = net.add_constant((), np.array(1.0, dtype=np.float32)).get_output(0)
    beta = net.add_constant((2,), np.array([1.0, 2.0], dtype=np.float32)).get_output(0)
    fill.set_input(1, alpha)
    fill.set_input(2, beta)
    snap = take_snapshot(net, {})
    assert _layer(snap, "SLICE").inputs == ["x", None, size.name, None, None, axes.name]
    assert _layer(snap, "FILL").inputs == [None, alpha.name, beta.name]


def test_snapshot_lists_producers_before_consumers(net):
    x = net.add_input("x", trt.float32, (2, 6))
    shuffle = net.add_shuffle(x)
    shape = _i64(net, [3, 4])  # created after the shuffle that reads it
    shuffle.set_input(1, shape)
    kinds = [r.kind for r in take_snapshot(net, {}).layers]
    assert kinds == ["CONSTANT", "SHUFFLE"]
    assert [net.get_layer(i).type for i in range(2)] == [trt.LayerType.SHUFFLE,
                                                         trt.LayerType.CONSTANT]


def test_snapshot_of_a_kind_without_reference_function(net, monkeypatch):
    monkeypatch.delitem(snapshot_module.REFERENCE_LAYERS, "SHUFFLE")
    x = net.add_input("x", trt.float32, (2, 6))
    out = net.add_shuffle(x).get_output(0)
    snap = take_snapshot(net, {})
    assert snap.unsupported_kinds() == ["SHUFFLE"]
    layer = _layer(snap, "SHUFFLE")
    assert layer.inputs == ["x"] and [o.name for o in layer.outputs] == [out.name]


# --- run_network on networks parsed from ONNX by TensorRT's ONNX parser ---------------------

W = np.array([[1.0, -2.0], [0.5, 1.0], [-1.0, 3.0]], dtype=np.float32)
B = np.array([0.25, -0.5], dtype=np.float32)
X = np.array([[1.0, 2.0, 3.0], [-1.0, 0.5, 2.0]], dtype=np.float32)


def _model(batch="N"):
    """y = relu(x @ W + b) with W, b as initializers; x: float32 [batch, 3]."""
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["xw"]),
         helper.make_node("Add", ["xw", "b"], ["z"]),
         helper.make_node("Relu", ["z"], ["y"])],
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 2])],
        initializer=[numpy_helper.from_array(W, "W"), numpy_helper.from_array(B, "b")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _expected(x):
    return np.maximum(x @ W + B, 0)  # numpy, not our code


@pytest.fixture
def parsed():
    from torch_trt_ref.runtime.network import parse_onnx

    return parse_onnx(_model())


def test_run_network_matches_numpy(parsed):
    import torch_trt_ref

    by_name = torch_trt_ref.run_network(parsed.network, {"x": torch.from_numpy(X)})
    in_order = torch_trt_ref.run_network(parsed.snapshot(), [X])  # numpy input, by position
    assert list(by_name) == ["y"]
    np.testing.assert_allclose(by_name["y"].numpy(), _expected(X), rtol=1e-6)
    assert torch.equal(by_name["y"], in_order["y"])


def test_run_network_takes_any_size_of_a_dynamic_dim(parsed):
    from torch_trt_ref import run_network

    x = np.arange(15, dtype=np.float32).reshape(5, 3) - 7
    assert parsed.snapshot().inputs[0].shape == (-1, 3)
    np.testing.assert_allclose(run_network(parsed.network, [x])["y"].numpy(), _expected(x),
                               rtol=1e-6)


@pytest.mark.parametrize("inputs, error, message", [
    ({"X": X}, ValueError, "unknown input(s) X; missing input(s) x; the network's inputs "
                           "are x: float32 (-1, 3)"),
    ({}, ValueError, "missing input(s) x"),
    ([X, X], ValueError, "2 inputs given, the network takes 1"),
    ({"x": X.astype(np.float64)}, TypeError, "dtype float64, the network takes float32"),
    ({"x": X[:, :2]}, ValueError, "shape (2, 2), the network takes (-1, 3)"),
    ({"x": [1.0, 2.0, 3.0]}, TypeError, "expected a torch.Tensor or numpy array, got list"),
])
def test_run_network_names_what_it_accepts(parsed, inputs, error, message):
    from torch_trt_ref import run_network

    with pytest.raises(error) as info:
        run_network(parsed.network, inputs)
    assert message in str(info.value)


def test_parse_onnx_reports_the_parsers_error():
    from onnx import TensorProto, helper

    from torch_trt_ref.runtime.network import OnnxParseError, parse_onnx

    graph = helper.make_graph(
        [helper.make_node("NoSuchOp", ["x"], ["y"], domain="example.custom")], "bad",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("example.custom", 1)])
    with pytest.raises(OnnxParseError, match="NoSuchOp"):
        parse_onnx(model)


@pytest.fixture
def model_path(tmp_path):
    import onnx

    path = tmp_path / "mlp.onnx"
    onnx.save(_model(batch=2), str(path))
    return path


def test_cli_onnx_prints_outputs_and_layer_kinds(model_path, tmp_path, capsys):
    from torch_trt_ref.cli import main

    np.savez(tmp_path / "inputs.npz", x=X)
    assert main(["onnx", str(model_path), "--inputs", str(tmp_path / "inputs.npz")]) == 0
    out = capsys.readouterr().out
    y = _expected(X)
    assert f"output y: (2, 2) float32 min {y.min():.6g} max {y.max():.6g}" in out
    assert "MATRIX_MULTIPLY x1" in out and "ELEMENTWISE" in out


def test_cli_onnx_compare_without_onnxruntime_says_so(model_path, monkeypatch, capsys):
    import sys

    from torch_trt_ref.cli import main

    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import raises ImportError
    assert main(["onnx", str(model_path), "--compare"]) != 0
    assert "--compare needs onnxruntime, which is not installed" in capsys.readouterr().err


def test_cli_onnx_parse_failure_exits_with_the_parsers_message(tmp_path, capsys):
    from torch_trt_ref.cli import main

    path = tmp_path / "broken.onnx"
    path.write_bytes(b"not a model")
    assert main(["onnx", str(path)]) == 2
    assert "error:" in capsys.readouterr().err


class _FakeOnnxRuntime:
    """Stands in for onnxruntime (an optional dependency): its session returns numpy's
    result, plus ``offset``."""

    def __init__(self, offset=0.0):
        self.offset = offset
        outer = self

        class InferenceSession:
            def __init__(self, path, providers):
                assert providers == ["CPUExecutionProvider"]

            def run(self, names, feeds):
                assert names == ["y"]
                return [_expected(feeds["x"]) + outer.offset]

        self.InferenceSession = InferenceSession


@pytest.mark.parametrize("offset, status, verdict", [(0.0, 0, "matches"),
                                                     (0.01, 1, "DIFFERS")])
def test_cli_onnx_compare_with_onnxruntime(model_path, monkeypatch, capsys, offset, status,
                                           verdict):
    import sys

    from torch_trt_ref.cli import main

    monkeypatch.setitem(sys.modules, "onnxruntime", _FakeOnnxRuntime(offset))
    assert main(["onnx", str(model_path), "--compare"]) == status
    assert f"onnxruntime y: {verdict}" in capsys.readouterr().out
