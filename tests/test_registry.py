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


def _calls(sig):
    """Argument lists for one schema, as fx nodes carry them: required ones positionally,
    optional ones positionally, by keyword or left out, and the mistakes Signature.bind
    rejects (too many positionals, an unknown, doubled or missing argument)."""
    params = list(sig.parameters.values())
    positional = [p for p in params if p.kind == p.POSITIONAL_OR_KEYWORD]
    required = [p for p in params if p.default is p.empty]
    values = {p.name: f"<{p.name}>" for p in params}
    head = tuple(values[p.name] for p in positional if p.default is p.empty)
    yield head, {p.name: values[p.name] for p in required if p.kind == p.KEYWORD_ONLY}
    yield tuple(values[p.name] for p in positional), {
        p.name: values[p.name] for p in params if p.kind == p.KEYWORD_ONLY}
    yield (), dict(values)
    yield head[:1], {p.name: values[p.name] for p in params[1:]}
    yield tuple(values[p.name] for p in positional) + ("extra",), {}
    yield head, {"no_such_argument": 1}
    if head:
        yield head, {positional[0].name: "twice"}
        yield head[:-1], {}


def test_the_fast_binder_equals_signature_bind_on_every_registered_op():
    """conversion.registry._Binder (a dict build) against inspect.Signature.bind +
    apply_defaults, its slow route, on every ATen overload the registry converts: the same
    arguments in the same order, or the same TypeError."""
    from torch_trt_ref.conversion.registry import CONVERTERS, _binder, _signature, reference_bind

    checked = 0
    for target in CONVERTERS.targets():
        sig = _signature(target)
        if sig is None or _binder(target) is None:
            continue
        for args, kwargs in _calls(sig):
            try:
                expected = reference_bind(sig, args, kwargs)
            except TypeError:
                expected = TypeError
            try:
                got = _binder(target).bind(args, kwargs)
            except TypeError:
                got = TypeError
            assert got == expected and (got is TypeError or list(got) == list(expected)), \
                (target, args, kwargs)
            checked += 1
    assert checked > 2000
