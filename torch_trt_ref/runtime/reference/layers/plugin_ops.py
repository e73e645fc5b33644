"""PLUGIN_V3 layers the reference executor can run: those of ``conversion.plugin`` (a
``TorchOpPlugin``), which call the custom op's own eager kernel; any other plugin's code
is CUDA the executor cannot run (Note [kinds the reference cannot run])."""

from __future__ import annotations

import importlib
import json

import torch

from ..registry import reference_layer
from .attention_ops import unrunnable_reason


@reference_layer("PLUGIN_V3", "IPluginV3Layer",
                 attrs=(("op", "plugin.op_name"), ("module", "plugin.op_module"),
                        ("spec", "plugin.op_spec")))
def plugin_v3(inputs, op=None, module=None, spec=None):
    if op is None:  # not ours: the plugin has no op_name
        raise NotImplementedError(unrunnable_reason("PLUGIN_V3"))
    spec = json.loads(spec)
    kwargs = dict(spec["args"]) | dict(zip(spec["tensors"], inputs, strict=True))
    out = resolve_op(op, module)(**kwargs)
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def resolve_op(qualified: str, module: str) -> torch._ops.OpOverload:
    """``torch.ops.<ns>.<op>.<overload>`` for "ns::op.overload", importing ``module`` (the
    op's definition) when the op is not registered in this process yet."""
    namespace, _, rest = qualified.partition("::")
    name, _, overload = rest.partition(".")
    try:
        return getattr(getattr(getattr(torch.ops, namespace), name), overload)
    except AttributeError:
        pass
    try:
        importlib.import_module(module)
    except (ImportError, ValueError) as err:
        raise RuntimeError(f"the plugin layer calls custom op {qualified}, defined in module "
                           f"{module!r}, which cannot be imported: {err}") from err
    try:
        return getattr(getattr(getattr(torch.ops, namespace), name), overload)
    except AttributeError:
        raise RuntimeError(f"the plugin layer calls custom op {qualified}, which is not "
                           f"registered (its module {module!r} did not define it)") from None
