"""The FX interpreter: walks a TensorRT segment in topological order and asks the
registered converter of each node to append layers to a strongly typed network."""

from __future__ import annotations

import functools
import operator
from dataclasses import dataclass, field
from typing import Any, Sequence

import torch
from torch.fx import GraphModule, Node

from .._trt import make_logger, to_torch_dtype, to_trt_dtype, trt
from ..settings import CompilationSettings, op_name
from ..weights import untraced
from . import helpers
from .context import ConversionContext
from .registry import (
    CONVERTERS,
    ConverterRegistry,
    _signature,
    normalize_arguments,
)
from .shapes import TensorSpec


class ConversionError(RuntimeError):
    """A converter failed on a node; the message names the node and op."""


@dataclass
class ConvertedNetwork:
    """A finished network plus everything the builder and the runtime need."""

    builder: Any
    logger: Any
    net: Any
    ctx: ConversionContext
    inputs: list[TensorSpec]
    output_names: list[str]
    output_dtypes: list[torch.dtype]
    requires_output_allocator: bool = False
    converters_used: dict[str, int] = field(default_factory=dict)
    # For the divergence finder (torch_trt_ref.debug): FX node name -> names of the network
    # tensors holding its value, and -> the converter function that built it.
    node_outputs: dict[str, tuple[str | None, ...]] = field(default_factory=dict)
    node_converters: dict[str, str] = field(default_factory=dict)


class Interpreter:
    """Converts one GraphModule into a TensorRT network. ``inputs`` gives one TensorSpec
    per placeholder, in order."""

    def __init__(self, gm: GraphModule, inputs: Sequence[TensorSpec],
                 settings: CompilationSettings, registry: ConverterRegistry = CONVERTERS):
        self.gm, self.inputs, self.settings, self.registry = gm, list(inputs), settings, registry

    def run(self) -> ConvertedNetwork:
        logger = make_logger()
        builder = trt.Builder(logger)
        flags = 1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED)
        net = builder.create_network(flags)
        ctx = ConversionContext(net, self.settings)
        result = ConvertedNetwork(builder, logger, net, ctx, self.inputs, [], [])
        if self.registry.preamble_targets:
            self._preambles(ctx)
        placeholders = iter(self.inputs)
        for node in self.gm.graph.nodes:
            ctx.node = node
            if node.op == "placeholder":
                spec = next(placeholders)
                ctx.tensors[node] = net.add_input(spec.name, to_trt_dtype(spec.dtype),
                                                  spec.trt_shape)
            elif node.op == "get_attr":
                value = operator.attrgetter(node.target)(self.gm)
                ctx.constants[node] = value
                if isinstance(value, torch.Tensor):
                    with untraced():  # Note [Metadata reads skip the weight tracer]
                        key = value.untyped_storage().data_ptr()
                    ctx.param_names[key] = node.meta.get("param_name", node.target)
            elif node.op == "call_function":
                self._convert(ctx, node, result)
            elif node.op == "output":
                self._mark_outputs(ctx, node.args[0], result)
            else:
                raise ConversionError(f"cannot convert {node.op} node {node.name}")
        ctx.node = None
        result.node_outputs = {n.name: _tensor_names(v) for n, v in ctx.tensors.items()}
        return result

    def _preambles(self, ctx: ConversionContext) -> None:
        """Note [Converter preambles] (registry.py): each preamble once, with its nodes."""
        groups: dict = {}
        for node in self.gm.graph.nodes:
            if node.op == "call_function" and node.target in self.registry.preamble_targets:
                support, _ = self.registry.select(node, self.settings)
                if support is not None and support.preamble is not None:
                    groups.setdefault(support.preamble, []).append(node)
        for preamble, nodes in groups.items():
            preamble(ctx, nodes)

    def _convert(self, ctx: ConversionContext, node: Node, result: ConvertedNetwork) -> None:
        support, reason = self.registry.select(node, self.settings)
        if support is None:
            raise ConversionError(f"node {node.name} ({op_name(node.target)}): {reason}")
        args = torch.fx.node.map_arg(node.args, lambda n: _value(ctx, n))
        kwargs = torch.fx.node.map_arg(node.kwargs, lambda n: _value(ctx, n))
        args, kwargs = normalize_arguments(node.target, args, kwargs)
        try:
            kwargs = _constants_as_itensors(ctx, node.target, kwargs, support.constants)
            out = support.implementation(ctx, *args, **kwargs)
        except Exception as err:
            raise ConversionError(
                f"converter of {support.name} failed on node {node.name}: "
                f"{type(err).__name__}: {err}") from err
        out = _match_meta_dtype(ctx, node, out)
        if _holds_itensor(out):
            ctx.tensors[node] = out
        else:
            ctx.constants[node] = out
        result.requires_output_allocator |= support.requires_output_allocator
        result.converters_used[support.name] = result.converters_used.get(support.name, 0) + 1
        fn = support.implementation
        result.node_converters[node.name] = f"{fn.__module__}:{fn.__qualname__}"

    def _mark_outputs(self, ctx: ConversionContext, outputs: Any, result: ConvertedNetwork):
        outputs = outputs if isinstance(outputs, (tuple, list)) else (outputs,)
        marked: set[str] = set()
        for i, out in enumerate(outputs):
            value = _value(ctx, out)
            if not helpers.is_tensor(value):
                value = helpers.itensor(ctx, value)
            if value.is_network_input or value.name in marked or value.is_network_output:
                value = helpers.identity(ctx, value)
            value.name = f"output_{i}"
            ctx.net.mark_output(value)
            marked.add(value.name)
            result.output_names.append(value.name)
            result.output_dtypes.append(to_torch_dtype(value.dtype))


# Note [Constant inputs]: a node whose tensor arguments are all torch.Tensor constants (a
# subgraph fold_constants left: an op with several outputs such as native_layer_norm, a
# random op, one that failed to evaluate) reached converters written for network tensors,
# and most crashed (layer_norm over a weight: DeBERTa-v2 compiled to 0 engines; 77 of 277
# ops in conformance/constants.py). So for such a node every constant Tensor argument
# becomes a constant layer before the converter runs, except those the converter declares
# in ``constants`` (it reads them as weights: a convolution kernel). A node mixing
# constants and network tensors keeps its constants: converters fold them into weights
# and broadcasts (``helpers.elementwise``), which a constant layer would only lengthen;
# such converters take their data inputs through ``helpers.itensor`` / ``helpers.cast``
# (conformance/test_constants.py's ``first_constant`` cells).
# Lists of tensors (cat, index) are left as they are.


@functools.lru_cache(maxsize=None)
def _tensor_argument_names(target: Any) -> list[str]:
    if not isinstance(target, torch._ops.OpOverload):
        return []
    # the names normalize_arguments gives (``self`` is ``input`` there)
    names = list(_signature(target).parameters)
    tensor = torch._C.OptionalType.ofTensor()
    return [name for name, a in zip(names, target._schema.arguments)
            if a.type.isSubtypeOf(tensor)]


def _constants_as_itensors(ctx: ConversionContext, target: Any, kwargs: dict,
                           keep: frozenset) -> dict:
    """``kwargs`` with each constant Tensor argument not in ``keep`` as an ITensor, when
    no Tensor argument is a network tensor (Note [Constant inputs])."""
    names = [n for n in _tensor_argument_names(target) if kwargs.get(n) is not None]
    if any(helpers.is_tensor(kwargs[n]) for n in names):
        return kwargs
    for name in names:
        if isinstance(kwargs[name], torch.Tensor) and name not in keep:
            kwargs[name] = helpers.itensor(ctx, kwargs[name])
    return kwargs


def _value(ctx: ConversionContext, node: Node) -> Any:
    if node in ctx.tensors:
        return ctx.tensors[node]
    if node in ctx.constants:
        return ctx.constants[node]
    raise ConversionError(f"node {node.name} is used before it was converted")


def _tensor_names(value: Any) -> tuple[str | None, ...]:
    """The network tensor names of a node's value (names are final once outputs are marked)."""
    values = value if isinstance(value, (tuple, list)) else (value,)
    return tuple(v.name if helpers.is_tensor(v) else None for v in values)


def _holds_itensor(value: Any) -> bool:
    if isinstance(value, (tuple, list)):
        return any(_holds_itensor(v) for v in value)
    return helpers.is_tensor(value)


def _match_meta_dtype(ctx: ConversionContext, node: Node, out: Any) -> Any:
    """Cast a converter's single ITensor output to the dtype torch inferred for the node,
    so the strongly typed network carries exactly the graph's types."""
    meta = node.meta.get("val")
    if helpers.is_tensor(out) and isinstance(meta, torch.Tensor):
        with untraced():  # Note [Metadata reads skip the weight tracer]
            dtype = meta.dtype
        if to_torch_dtype(out.dtype) != dtype:
            return helpers.cast(ctx, out, dtype)
    return out

