"""The snapshot of a TensorRT network (every input, dependency order, unknown kinds) and
``torch_trt_ref.run_network`` on networks parsed from small ONNX models; expected values
are worked out by hand or with numpy."""

from __future__ import annotations

import numpy as np
import pytest

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
