"""Quantizers in partitioning (DESIGN D13): a quantizer and the op that reads it form one
fusion group, a quantizer whose readers all run in PyTorch runs there too, and the support
report names every quantizer with its precision."""

from __future__ import annotations

import operator

from torch.fx import Node

from ..quantization.ops import QUANTIZE_OPS, format_of


def is_quantizer(node: Node) -> bool:
    return node.op == "call_function" and node.target in QUANTIZE_OPS


def quantizer_groups(calls: list[Node]) -> list[list[Node]]:
    """Each op that reads quantizer outputs, with those quantizers (TensorRT fuses Q/DQ into
    the op: a segment boundary between them would leave the pair without its consumer)."""
    readers: dict[Node, list[Node]] = {}
    for node in calls:
        if is_quantizer(node):
            for user in node.users:
                readers.setdefault(user, []).append(node)
    return [[*quantizers, user] for user, quantizers in readers.items()
            if user.op == "call_function"]


def follow_readers(calls: list[Node], rejected: dict[Node, str]) -> None:
    """Reject (into ``rejected``) each quantizer all of whose readers run in PyTorch."""
    for node in calls:
        users = list(node.users)
        if is_quantizer(node) and node not in rejected and users and all(
                u in rejected for u in users):
            rejected[node] = (f"its reader {users[0].name} runs in PyTorch: a quantizer "
                              "stays with the op that reads it")


def describe(node: Node) -> str:
    """'int8 per-channel axis 0, weight' style summary of a quantizer node."""
    args = list(node.args) + [None] * 7
    if node.target == QUANTIZE_OPS[0]:
        fmt = format_of(args[2], args[3]) or f"{args[2]}-bit"
        amax = _value(args[1])
        layout = "per-tensor" if amax is None or amax.numel() == 1 else "per-channel"
    else:
        fmt, layout = "nvfp4", f"blocks of {args[1]}"
    source = _value(args[0])
    return f"{fmt} {layout}, {'weight' if source is not None else 'activation'}"


def _value(arg):
    if isinstance(arg, Node) and arg.op == "get_attr":
        return operator.attrgetter(arg.target)(arg.graph.owning_module)
    return None
