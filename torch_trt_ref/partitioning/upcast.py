"""PyTorch segments of a half-precision compile whose ops have no kernel for fp16/bf16 on
the device (``erfcx`` on a CPU): those nodes run in float32 between casts, decided at
compile time, so the compiled module never fails at call time for a reason the compile
could have seen (issue 15)."""

from __future__ import annotations

import re

import torch
from torch.fx import GraphModule, Node

from ..lowering.meta import insert_call

HALF = (torch.float16, torch.bfloat16)
_MISSING_KERNEL = re.compile(r"not implemented for '(Half|BFloat16)'")
_PROBE_NUMEL = 4096  # real shapes up to this size; larger ones are probed at size <= 2


def _probe(val: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A small real tensor with ``val``'s dtype and rank: its own shape when small and
    static, else each dim clamped to 2 (kernel availability depends on dtype, not size)."""
    shape = [d if isinstance(d, int) else 2 for d in val.shape]
    if torch.Size(shape).numel() > _PROBE_NUMEL:
        shape = [min(d, 2) for d in shape]
    if val.dtype == torch.bool:
        return torch.ones(shape, dtype=torch.bool, device=device)
    return torch.ones(shape, dtype=val.dtype, device=device)


_PROBED: dict[tuple, bool] = {}  # (op, arguments, device) -> lacks a kernel; fixed per torch


def _lacks_kernel(node: Node, device: torch.device) -> bool:
    """Whether ``node``'s op raises "not implemented for 'Half'/'BFloat16'" on ``device``
    (any other error is not a missing kernel: a probe of clamped shapes may just not fit)."""
    def describe(n: Node):  # the key: dtypes and ranks, not values (layers repeat)
        val = n.meta.get("val")
        return (val.dtype, val.dim()) if isinstance(val, torch.Tensor) else val

    key = (node.target, repr(torch.fx.node.map_arg((node.args, node.kwargs), describe)),
           str(device))
    if key not in _PROBED:
        args, kwargs = torch.fx.node.map_arg(
            (node.args, node.kwargs), lambda n: _probe(n.meta["val"], device)
            if isinstance(n.meta.get("val"), torch.Tensor) else n.meta.get("val"))
        try:
            with torch.no_grad():
                node.target(*args, **kwargs)
            _PROBED[key] = False
        except Exception as err:  # only the missing-kernel message counts
            _PROBED[key] = bool(_MISSING_KERNEL.search(str(err)))
    return _PROBED[key]


def _half_inputs(node: Node) -> list[Node]:
    return [n for n in node.all_input_nodes if isinstance(n.meta.get("val"), torch.Tensor)
            and n.meta["val"].dtype in HALF]


def upcast_missing_kernels(gm: GraphModule, device: torch.device) -> list[str]:
    """Run in float32 every node of ``gm`` (a PyTorch segment) whose op has no kernel for
    its fp16/bf16 inputs on ``device``; its half outputs are cast back. Returns one line
    per node for the compile report.

    Before: ``y = special_erfcx(x_fp16)``
    After:  ``x32 = _to_copy(x_fp16, float32); y32 = special_erfcx(x32);
              y = _to_copy(y32, float16)``"""
    lines = []
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
            continue
        half = _half_inputs(node)
        if not half or not _lacks_kernel(node, device):
            continue
        dtype = half[0].meta["val"].dtype
        for value in half:
            up = insert_call(gm, torch.ops.aten._to_copy.default, (value,), node,
                              {"dtype": torch.float32})
            node.replace_input_with(value, up)
        out = node.meta.get("val")
        with half[0].meta["val"].fake_mode:
            args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs),
                                                 lambda n: n.meta["val"])
            node.meta["val"] = node.target(*args, **kwargs)
        users = list(node.users)
        if isinstance(out, torch.Tensor) and out.dtype in HALF:
            anchor = node.next
            down = insert_call(gm, torch.ops.aten._to_copy.default, (node,), anchor,
                                {"dtype": out.dtype})
            for user in users:
                user.replace_input_with(node, down)
        elif isinstance(out, (tuple, list)):
            for user in users:  # getitem of a multi-output op
                item = user.meta.get("val")
                if isinstance(item, torch.Tensor) and item.dtype in HALF:
                    after = list(user.users)
                    down = insert_call(gm, torch.ops.aten._to_copy.default, (user,),
                                        user.next, {"dtype": item.dtype})
                    for later in after:
                        later.replace_input_with(user, down)
        lines.append(f"{node.name} ({node.target}) runs in float32: no "
                     f"{str(dtype).replace('torch.', '')} kernel on {device.type}")
    if lines:
        gm.graph.lint()
        gm.recompile()
    return lines
