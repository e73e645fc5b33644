"""The converter registry: priorities, validators with reasons, schema normalization."""

import torch

from torch_trt_ref import CompilationSettings
from torch_trt_ref.conversion.registry import converter, normalize_arguments

aten = torch.ops.aten


def _relu_node():
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    x.meta["val"] = torch.empty(2, 3)
    node = graph.call_function(aten.relu.default, (x,))
    node.meta["val"] = torch.empty(2, 3)
    return node


def test_user_converter_overrides_builtin_by_priority(registry):
    @converter(aten.relu.default, priority=100, registry=registry)
    def mine(ctx, input):
        return input

    support, reason = registry.select(_relu_node(), CompilationSettings())
    assert reason is None and support.implementation is mine


def test_rejecting_validator_falls_through_to_next_and_reasons_are_kept(registry):
    @converter(aten.relu.default, priority=100, registry=registry,
               validator=lambda node, settings: "only for testing")
    def picky(ctx, input):
        return input

    support, reason = registry.select(_relu_node(), CompilationSettings())
    assert support.implementation is not picky  # the built-in one accepted it

    registry.entries[aten.relu.default] = registry.entries[aten.relu.default][:1]
    support, reason = registry.select(_relu_node(), CompilationSettings())
    assert support is None and reason == "only for testing"


def test_missing_converter_reason(registry):
    graph = torch.fx.Graph()
    node = graph.call_function(aten.lgamma.default, ())
    support, reason = registry.select(node, CompilationSettings())
    assert support is None and "no converter for aten.lgamma.default" in reason


def test_normalize_arguments_fills_schema_defaults_by_name():
    args, kwargs = normalize_arguments(aten.leaky_relu.default, ("x",), {})
    assert args == () and kwargs == {"input": "x", "negative_slope": 0.01}
    args, kwargs = normalize_arguments(aten.add.Tensor, ("a", "b"), {"alpha": 2})
    assert kwargs == {"input": "a", "other": "b", "alpha": 2}


def test_registry_copy_is_independent(registry):
    from torch_trt_ref.compiler import CONVERTERS

    @converter(aten.lgamma.default, registry=registry)
    def lgamma(ctx, input):
        raise NotImplementedError

    assert aten.lgamma.default in registry and aten.lgamma.default not in CONVERTERS
