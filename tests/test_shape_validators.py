"""Validators of the layout, slicing and creation converters: every variant they cannot
convert is rejected with a reason (which the partition report shows)."""

import pytest
import torch
from torch.fx import Graph

from torch_trt_ref.conversion.registry import CONVERTERS
from torch_trt_ref.settings import CompilationSettings

aten = torch.ops.aten


def node_for(target, input_val, out_val, args=(), kwargs=None):
    """A call_function node of ``target`` on a placeholder with the given meta values."""
    graph = Graph()
    x = graph.placeholder("x")
    x.meta["val"] = input_val
    node = graph.call_function(target, (x, *args), kwargs or {})
    node.meta["val"] = out_val
    return node


def reason(node):
    (support,) = CONVERTERS.candidates(node.target)
    return support.validate(node, CompilationSettings())


def test_to_copy_accepts_a_dtype_change():
    x = torch.empty(2, 3)
    assert reason(node_for(aten._to_copy.default, x, x.half(), kwargs={"dtype": torch.half})) \
        is None


@pytest.mark.parametrize("kwargs,out,expected", [
    ({"memory_format": torch.channels_last}, torch.empty(1, 2, 3, 4), "memory_format"),
    ({"layout": torch.sparse_coo}, torch.empty(1, 2, 3, 4), "layout"),
    ({"device": "meta"}, torch.empty(1, 2, 3, 4, device="meta"), "device transfer"),
])
def test_to_copy_rejects_layout_format_and_device_changes(kwargs, out, expected):
    node = node_for(aten._to_copy.default, torch.empty(1, 2, 3, 4), out, kwargs=kwargs)
    assert expected in reason(node)


def test_as_strided_rejects_non_contiguous_inputs():
    view = torch.empty(4, 4).t()
    node = node_for(aten.as_strided.default, view, torch.empty(2, 2), ([2, 2], [1, 4]))
    assert "non-contiguous" in reason(node)


def test_unfold_rejects_0d_inputs():
    node = node_for(aten.unfold.default, torch.tensor(1.0), torch.empty(1), (0, 1, 1))
    assert "0-d" in reason(node)


def test_creation_rejects_sparse_layouts():
    graph = Graph()
    node = graph.call_function(aten.full.default, ([2, 2], 1.0), {"layout": torch.sparse_coo})
    node.meta["val"] = torch.empty(2, 2)
    assert "layout" in reason(node)
