"""Quantizers in partitioning (DESIGN D13): a quantizer and the op that reads it form one
fusion group, a quantizer whose readers all run in PyTorch runs there too, and the support
report names every quantizer with its precision."""

from __future__ import annotations

import operator

from torch.fx import Node

from ..conversion.blocks.nodes import node_args
from ..quantization.attention_op import QUANTIZED_SDPA
from ..quantization.ops import QUANTIZE_OPS, format_of


def is_quantizer(node: Node) -> bool:
    return node.op == "call_function" and node.target in QUANTIZE_OPS


def holds_quantizers(node: Node) -> bool:
    """A quantizer, or an op with its own quantizers (quantized attention: Q/DQ on q, k, v
    and P inside one node, Note [Quantized attention is one node]); the support report
    names both. Only quantizers group with their readers: attention is an op of its own."""
    return is_quantizer(node) or (node.op == "call_function" and node.target == QUANTIZED_SDPA)


def quantized_weight(node: Node, depth: int = 3) -> bool:
    """Is ``node`` a weight quantizer (all inputs constant) or a layout op computing from a
    quantized weight and constants only (its transpose in front of a matmul), ``depth``
    levels deep? TensorRT folds these into the quantized weight at build time, as fold_constants
    folds an fp32 weight's transpose: they are not work that makes a segment an engine."""
    if node.op != "call_function" or depth < 0:
        return False
    inputs = node.all_input_nodes
    if is_quantizer(node):
        return all(a.op == "get_attr" for a in inputs)
    computed = [a for a in inputs if a.op != "get_attr"]  # one chain: at most depth calls
    return len(computed) == 1 and quantized_weight(computed[0], depth - 1)


def quantizer_groups(calls: list[Node]) -> list[list[Node]]:
    """Each quantizer with the ops that read it (TensorRT fuses Q/DQ into the op: a segment
    boundary between them would leave the pair without its consumer). A weight quantizer's
    readers that compute from constants only (the weight's transpose in front of a matmul)
    are followed on to the op that reads them with an activation: the quantized weight is
    never computed in one segment and passed to another."""
    if not any(map(is_quantizer, calls)):
        return []
    constant: set[Node] = set()
    for node in calls:  # graph order: a node's inputs come first
        if all(a.op == "get_attr" or a in constant for a in node.all_input_nodes):
            constant.add(node)
    groups = []
    for node in calls:
        if not is_quantizer(node):
            continue
        group, frontier, seen = [node], list(node.users), set()
        while frontier:
            user = frontier.pop()
            if user in seen or user.op != "call_function":
                continue
            seen.add(user)
            group.append(user)
            if user in constant:
                frontier.extend(user.users)
        if len(group) > 1:
            groups.append(group)
    return groups


def follow_readers(calls: list[Node], rejected: dict[Node, str]) -> None:
    """Reject (into ``rejected``) each quantizer all of whose readers run in PyTorch."""
    for node in calls:
        users = list(node.users)
        if is_quantizer(node) and node not in rejected and users and all(
                u in rejected for u in users):
            rejected[node] = (f"its reader {users[0].name} runs in PyTorch: a quantizer "
                              "stays with the op that reads it")


def describe(node: Node) -> str:
    """'int8 per-channel, weight' style summary of a quantizer node (or of quantized
    attention: 'int8 per-tensor attention q/k/v/P, activation')."""
    args = list(node.args) + [None] * 7
    if node.target == QUANTIZED_SDPA:
        args = node_args(node)
        bits = (args["num_bits"], args["exponent_bits"])
        return f"{format_of(*bits) or f'{bits[0]}-bit'} per-tensor attention q/k/v/P, activation"
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
