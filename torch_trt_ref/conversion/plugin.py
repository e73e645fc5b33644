"""``plugin("ns::op")``: a converter for a ``torch.library.custom_op`` as a TensorRT plugin
layer (the peer's ``generate_plugin`` + ``generate_plugin_converter``). Not available with
TensorRT for RTX 1.7.1: it checks the op, then raises ``PluginUnavailable`` saying why;
until then the op runs in a PyTorch segment (docs/converters.md "Custom ops and plugins").

Note [Plugin layers in TensorRT for RTX] (checked with tensorrt_rtx 1.7.1.116, the newest
on PyPI): ``INetworkDefinition`` has no ``add_plugin*`` method (``add_plugin_v2``,
``add_plugin_v3``, ``add_plugin`` are all absent), and ``tensorrt_rtx.plugin`` (the
``@trt.plugin.register`` decorators) fails to import (no ``tensorrt_rtx_bindings.plugin``).
The only door is the ONNX parser's plugin fallback: a node whose op is a registered
``IPluginCreatorV3One`` becomes a PLUGIN_V3 layer (an ``IPluginCreator`` of V2 is refused:
"TensorRT-RTX imports IPluginV3 plugins registered with an IPluginCreatorV3One creator
only"). From the wheel that door aborts the process (``std::terminate``, no Python
exception): the parser opens ``libtensorrt_rtx.so`` by its unversioned name, and the wheel
ships only ``libtensorrt_rtx.so.1``. With that name on ``LD_LIBRARY_PATH`` (fixed when the
process starts) the parser adds the layer and the CPU-only builder builds a plan around a
Python plugin. We never take that door unasked: a missing library would kill the caller."""

from __future__ import annotations

import ctypes.util
import os
from pathlib import Path

import torch

from .._trt import BACKEND, IS_RTX, trt

_LIBRARY = "libtensorrt_rtx.so"


class PluginUnavailable(NotImplementedError):
    """A plugin converter cannot be made with the installed TensorRT; the message says
    why and where the op runs instead."""


def plugin(name: str):
    """The converter of custom op ``name`` ("ns::op" or "ns::op.overload") as a plugin
    layer calling the op's own eager kernel. Raises ``ValueError`` for a name that is not a
    custom op with a fake kernel, and ``PluginUnavailable`` where TensorRT cannot take a
    plugin layer (TensorRT for RTX 1.7.1: Note [Plugin layers in TensorRT for RTX])."""
    overload = custom_op_overload(name)
    raise PluginUnavailable(
        f"no plugin converter for {overload}: {_why_not()}; the op runs in a PyTorch segment "
        "(the partition report says 'no converter for ...'); docs/converters.md \"Custom ops "
        "and plugins\"")


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


def _why_not() -> str:
    if not IS_RTX:
        return (f"the installed TensorRT ({BACKEND}) is not the one this path was checked "
                "with; plugin layers are implemented for none yet")
    missing = [n for n in ("add_plugin_v3", "add_plugin_v2", "add_plugin")
               if not hasattr(trt.INetworkDefinition, n)]
    found = library_on_search_path()
    return (f"TensorRT for RTX {trt.__version__}'s INetworkDefinition has no "
            f"{'/'.join(missing)} and its Python plugin API (tensorrt_rtx.plugin) is not "
            "shipped; its ONNX parser's plugin fallback needs " + _LIBRARY +
            (f" (found: {found}) and is not wired up here yet" if found else
             " by that name, which the wheel does not ship (only .so.1), and aborts the "
             "process without it"))


def library_on_search_path() -> str | None:
    """Where ``libtensorrt_rtx.so`` (unversioned) is found by the ONNX parser's dlopen: the
    parser's own folder (its RPATH), ``LD_LIBRARY_PATH``, or the system's library cache."""
    folders = [Path(trt.__file__).parent.parent / "tensorrt_rtx_libs"]
    folders += [Path(p) for p in os.environ.get("LD_LIBRARY_PATH", "").split(":") if p]
    for folder in folders:
        if (folder / _LIBRARY).exists():
            return str(folder / _LIBRARY)
    return ctypes.util.find_library("tensorrt_rtx") and _LIBRARY
