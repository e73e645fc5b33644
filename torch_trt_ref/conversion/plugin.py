"""``plugin("ns::op")``: a converter for a ``torch.library.custom_op`` as a TensorRT plugin
layer (the peer's ``generate_plugin`` + ``generate_plugin_converter``) that the reference
executor runs with the op's own eager kernel. With TensorRT for RTX 1.7.1 it works only in
a process that can open ``libtensorrt_rtx.so`` (Note below), which the import shim arranges
(``_trt.py``, Note [TensorRT for RTX through a folder of links]); elsewhere it raises
``PluginUnavailable`` saying why and the op runs in a PyTorch segment (docs/converters.md
"Custom ops and plugins").

Note [Plugin layers in TensorRT for RTX] (checked with tensorrt_rtx 1.7.1.116, the newest
on PyPI): ``INetworkDefinition`` has no ``add_plugin*`` method (``add_plugin_v2``,
``add_plugin_v3``, ``add_plugin`` are all absent), and ``tensorrt_rtx.plugin`` (the
``@trt.plugin.register`` decorators) fails to import (no ``tensorrt_rtx_bindings.plugin``).
The only door is the ONNX parser's plugin fallback: a node whose op is a registered
``IPluginCreatorV3One`` becomes a PLUGIN_V3 layer (an ``IPluginCreator`` of V2 is refused:
"TensorRT-RTX imports IPluginV3 plugins registered with an IPluginCreatorV3One creator
only"). From the wheel that door aborts the process (``std::terminate``, no Python
exception): the parser opens ``libtensorrt_rtx.so`` by its unversioned name, and the wheel
ships only ``libtensorrt_rtx.so.1``. With that name beside the parser as it was opened (the
shim's folder of links), or on ``LD_LIBRARY_PATH`` (fixed when the process starts), the parser
adds the layer and the CPU-only builder builds a plan around a
Python plugin. ``plugin`` takes that door only after opening the library itself (a failed
``dlopen`` is an OSError, not an abort): a missing library would kill the caller."""

from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Any

import torch
from torch.fx import Node

from .._trt import BACKEND, IS_RTX, RTX_LINKS, RTX_UNVERSIONED, trt
from . import plugin_layer
from .registry import CONVERTERS, USER_PRIORITY, ConverterRegistry, ConverterSupport, node_args

_LIBRARY = RTX_UNVERSIONED


class PluginUnavailable(NotImplementedError):
    """A plugin converter cannot be made with the installed TensorRT; the message says
    why and where the op runs instead."""


def plugin(name: str, registry: ConverterRegistry = CONVERTERS) -> ConverterSupport:
    """Register the converter of custom op ``name`` ("ns::op" or "ns::op.overload"): a
    plugin layer calling the op's own eager kernel, its output shapes from the op's fake
    kernel (each output dim a constant or an input's dim, so dynamic shapes follow), its
    module named so a saved program imports it on load. Raises ``ValueError`` for a name
    that is not a custom op with a fake kernel, and ``PluginUnavailable`` where TensorRT
    cannot take a plugin layer in this process (Note [Plugin layers in TensorRT for RTX])."""
    overload = custom_op_overload(name)
    reason = _why_not()
    if reason is not None:
        raise PluginUnavailable(
            f"no plugin converter for {overload}: {reason}; the op runs in a PyTorch segment "
            "(the partition report says 'no converter for ...'); docs/converters.md "
            "\"Custom ops and plugins\"")
    for support in registry.candidates(overload):
        if support.implementation is _convert:
            return support
    support = ConverterSupport(overload, _convert, _validate, supports_dynamic_shapes=True,
                               priority=USER_PRIORITY, family="plugin", preamble=_prepare)
    registry.register(support)
    return support


def _validate(node: Node, settings) -> str | None:
    spec = plugin_spec(node)
    return spec if isinstance(spec, str) else None


def _prepare(ctx, nodes: list[Node]) -> None:
    calls = [(_qualified(n.target), op_module(n.target), plugin_spec(n),
              [len(v.meta["val"].shape) for v in node_args(n).values() if isinstance(v, Node)])
             for n in nodes]
    for node, prepared in zip(nodes, plugin_layer.add_plugin_layers(ctx.net, calls,
                                                                    ctx._keepalive)):
        ctx.prepared[node] = prepared


def _convert(ctx, **kwargs):
    node = ctx.node
    layer = ctx.prepared.pop(node)
    inputs = [kwargs[name] for name in plugin_spec(node)["tensors"]]
    outputs = plugin_layer.wire(ctx.net, layer, inputs)
    ctx.name_layer(layer, "plugin")
    return tuple(outputs) if isinstance(node.meta.get("val"), (tuple, list)) else outputs[0]


def plugin_spec(node: Node) -> dict | str:
    """The plugin's fields for ``node`` (see ``plugin_layer.TorchOpPlugin``), or the reason
    the op cannot be a plugin layer (it goes to PyTorch with that reason)."""
    tensors, args, in_vals = [], {}, []
    for name, value in node_args(node).items():
        if isinstance(value, Node):
            tensors.append(name)
            in_vals.append(value.meta.get("val"))
        elif _plain(value):
            args[name] = value
        else:
            return f"argument {name}={value!r} of {node.target} is not a plain value"
    out_vals = node.meta.get("val")
    out_vals = list(out_vals) if isinstance(out_vals, (tuple, list)) else [out_vals]
    if not all(isinstance(v, torch.Tensor) for v in in_vals + out_vals):
        return f"{node.target}: a plugin takes and returns tensors only"
    dtypes = [str(v.dtype).replace("torch.", "") for v in in_vals + out_vals]
    if any(d not in plugin_layer.ONNX_TYPES for d in dtypes):
        return f"{node.target}: dtypes {dtypes} not all supported by a plugin layer"
    shapes = []
    for out in out_vals:
        dims = [_dim_source(d, in_vals) for d in out.shape]
        if None in dims:
            bad = out.shape[dims.index(None)]
            return (f"output dim {bad} of {node.target} is neither a constant nor a dim of "
                    "an input (its fake kernel's shape)")
        shapes.append(dims)
    return {"args": args, "tensors": tensors, "in_dtypes": dtypes[:len(in_vals)],
            "out_dtypes": dtypes[len(in_vals):], "shapes": shapes}


def _dim_source(dim, in_vals) -> list | None:
    if isinstance(dim, int):
        return ["c", dim]
    expr = str(dim.node.expr) if isinstance(dim, torch.SymInt) else None
    if expr is not None and dim.node.expr.is_number:
        return ["c", int(dim.node.expr)]
    for i, value in enumerate(in_vals):
        for j, d in enumerate(value.shape):
            if isinstance(d, torch.SymInt) and str(d.node.expr) == expr:
                return ["in", i, j]
    return None


def _plain(value: Any) -> bool:
    if isinstance(value, (list, tuple)):
        return all(_plain(v) for v in value)
    return value is None or isinstance(value, (bool, int, float, str))


def _qualified(overload) -> str:
    return f"{overload._schema.name}.{overload._overloadname}"


def op_module(overload) -> str:
    """The Python module that defines custom op ``overload`` (imported on load)."""
    definition = torch._library.custom_ops.OPDEFS.get(overload._schema.name)
    fn = getattr(definition, "_init_fn", None)
    return getattr(fn, "__module__", "") or ""


def custom_op_overload(name: str) -> torch._ops.OpOverload:
    """The OpOverload of custom op ``name`` ("ns::op" or "ns::op.overload"), checked to have
    a fake (meta) kernel, or a ValueError naming what was wrong."""
    if not isinstance(name, str) or "::" not in name:
        raise ValueError(f"plugin takes an op name 'namespace::op', got {name!r}")
    namespace, _, rest = name.partition("::")
    op_name, _, overload_name = rest.partition(".")
    packet = getattr(getattr(torch.ops, namespace), op_name, None) if namespace else None
    if not isinstance(packet, torch._ops.OpOverloadPacket):
        raise ValueError(f"no op {name!r} is registered: define it with "
                         "torch.library.custom_op (and register_fake) before calling plugin")
    if namespace == "aten":
        raise ValueError(f"{name!r} is an ATen op: plugins are for custom ops; ATen ops get "
                         "a converter (docs/converters.md)")
    overload = getattr(packet, overload_name or "default", None)
    if overload is None:
        raise ValueError(f"op {namespace}::{op_name} has no overload {overload_name!r}; it "
                         f"has {sorted(packet.overloads())}")
    if overload._schema.is_mutable:
        raise ValueError(f"custom op {overload} mutates its arguments: a plugin layer's inputs "
                         "are read-only, so it stays in PyTorch")
    if not _has_fake(overload):
        raise ValueError(f"custom op {overload} has no fake kernel: register one with "
                         f"@{op_name}.register_fake, it gives the plugin its output shapes")
    return overload


def _has_fake(overload) -> bool:
    """A ``custom_op`` always has a fake kernel slot (one that raises until
    ``register_fake``), so ask its definition; an op of ``torch.library.Library`` has one
    when a Meta kernel is registered."""
    qualname = overload._schema.name
    definition = torch._library.custom_ops.OPDEFS.get(qualname)
    if definition is not None:
        return definition._abstract_fn is not None
    return torch._C._dispatch_has_kernel_for_dispatch_key(qualname, "Meta")


def _why_not() -> str | None:
    """None when a plugin layer can be added in this process, else why not."""
    if not IS_RTX:
        return (f"the installed TensorRT ({BACKEND}) is not the one this path was checked "
                "with (tensorrt_rtx)")
    if plugin_layer.onnx is None:
        return "the plugin layer is added through TensorRT's ONNX parser, which needs onnx"
    if library_on_search_path() is not None:
        return None
    missing = [n for n in ("add_plugin_v3", "add_plugin_v2", "add_plugin")
               if not hasattr(trt.INetworkDefinition, n)]
    return (f"TensorRT for RTX {trt.__version__}'s INetworkDefinition has no "
            f"{'/'.join(missing)} and its Python plugin API (tensorrt_rtx.plugin) is not "
            f"shipped; its ONNX parser's plugin fallback opens {_LIBRARY} by that name, "
            "which the wheel does not ship (only .so.1), and aborts the process without it; "
            f"torch_trt_ref opens the wheel's libraries through a folder holding that name, "
            f"but not here ({RTX_LINKS}): import torch_trt_ref before tensorrt_rtx, or start "
            f"Python with a folder holding a link {_LIBRARY} -> the wheel's "
            "libtensorrt_rtx.so.1 on LD_LIBRARY_PATH")


def library_on_search_path(links: bool = True) -> str | None:
    """Where the ONNX parser's ``dlopen("libtensorrt_rtx.so")`` finds the library: the
    folder the parser was opened from (its RPATH): the shim's folder of links (unless
    ``links`` is false: as in a process that imported tensorrt_rtx itself), or the wheel's
    own; else wherever this process's own ``dlopen`` finds it (LD_LIBRARY_PATH as the
    process started, the system's cache); None when it cannot."""
    if links and isinstance(RTX_LINKS, Path):
        return str(RTX_LINKS / _LIBRARY)
    beside = Path(trt.__file__).parent.parent / "tensorrt_rtx_libs" / _LIBRARY
    if beside.exists():
        return str(beside)
    try:
        ctypes.CDLL(_LIBRARY)
    except OSError:
        return None
    return _LIBRARY
