"""What converters and validators read off an FX node: its ATen arguments by name
(``node_args``), the FakeTensor of an argument (``fake``), static dims, which extra outputs
are used; and the validators several families share (dtype rules, ``all_of``)."""

from __future__ import annotations

import operator
from typing import Any, Callable, Optional

import torch
from torch.fx import Node

from ...weights import untraced
from ..registry import node_args

FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def fake(value: Any) -> Any:
    """The FakeTensor of a Node argument (or the value itself)."""
    return value.meta.get("val") if isinstance(value, Node) else value


def fake_input(node: Node) -> Any:
    """The FakeTensor of the node's first argument (``input``, ``weight``, ``query``...)."""
    return fake(next(iter(node_args(node).values()), None))


def int_sizes(sizes) -> bool:
    """Every size is a Python int (no SymInt: the FakeTensor's size is not symbolic)."""
    return all(isinstance(d, int) for d in sizes)


def float_only(node: Node, what: str) -> Optional[str]:
    """Reason string when the node's first input is not fp32/fp16/bf16."""
    x = fake(node.all_input_nodes[0]) if node.all_input_nodes else None
    if not isinstance(x, torch.Tensor) or x.dtype not in FLOAT_DTYPES:
        dtype = getattr(x, "dtype", None)
        return f"TensorRT {what} takes fp32/fp16/bf16 inputs only (got {dtype})"
    return None


def extra_outputs_used(node: Node, first_extra: int = 1) -> list[int]:
    """Indices >= ``first_extra`` of a tuple-returning node that some getitem reads."""
    if not isinstance(node.meta.get("val"), (tuple, list)):
        return []
    used = []
    for user in node.users:
        if user.target is not operator.getitem:
            return [-1]  # the tuple itself escapes: assume everything is used
        if user.args[1] >= first_extra and user.users:
            used.append(user.args[1])
    return sorted(used)


_QUANTIZED = (torch.int8, torch.uint8)


def plain_dtypes_ok(node: Node, settings) -> str | None:
    """Reject int8/uint8: TensorRT treats int8 as a quantized type and has no uint8 math,
    so neither follows torch's wrapping integer arithmetic."""
    for val in [node.meta.get("val")] + [a.meta.get("val") for a in node.all_input_nodes]:
        if isinstance(val, torch.Tensor) and val.dtype in _QUANTIZED:
            return f"{val.dtype} math is not supported (TensorRT: int8 is quantized, no uint8 math)"
    return None


def all_of(*validators: Callable) -> Callable:
    """A validator that returns the first reason any of ``validators`` gives."""

    def check(node: Node, settings) -> str | None:
        for validator in validators:
            reason = validator(node, settings)
            if reason is not None:
                return reason
        return None

    return check


def floating_point_input_ok(node, settings) -> Optional[str]:
    """Validator: the first input is a floating-point tensor (any width)."""
    if not fake_input(node).dtype.is_floating_point:
        return "only floating-point inputs are supported"
    return None


def float_operands_ok(node, settings) -> Optional[str]:
    """Validator: every tensor input is fp32/fp16/bf16 (TensorRT has no integer matmul)."""
    with untraced():  # Note [Metadata reads skip the weight tracer]
        dtypes = {fake(n).dtype for n in node.all_input_nodes}
    if not dtypes <= set(FLOAT_DTYPES):
        names = sorted(str(d).removeprefix("torch.") for d in dtypes)
        return f"TensorRT matrix multiply takes fp32/fp16/bf16 only (got {names})"
    return None


def strided_ok(node, settings) -> Optional[str]:
    """Validator: a creation op's ``layout`` is strided (or not given)."""
    layout = node_args(node).get("layout")
    if layout not in (None, torch.strided):
        return f"layout {layout} is not supported"
    return None
