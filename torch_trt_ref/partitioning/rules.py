"""Rules every strategy's plan goes through: min_block_size, merging adjacent segments of one
target, segment boundaries and weight footprints, tensor-only TensorRT boundaries."""

from __future__ import annotations

from torch.fx import GraphModule, Node

from .capability import is_compute_node
from .result import TENSORRT, TORCH, Segment
from .units import is_tensor_value


def apply_min_block_size(segments: list[Segment], min_block_size: int,
                         reasons: dict[Node, str] | None = None) -> list[Segment]:
    """Accelerator segments (any target but torch) with fewer than ``min_block_size``
    compute nodes (see ``capability.is_compute_node``) run in PyTorch instead."""
    for seg in segments:
        if seg.target == TORCH:
            continue
        size = 0
        for node in seg.nodes:  # count only as far as needed
            size += is_compute_node(node)
            if size >= min_block_size:
                break
        if size < min_block_size:
            if reasons is not None:
                for node in seg.nodes:
                    reasons.setdefault(node, f"its {seg.target} segment has {size} compute "
                                             f"node(s) < min_block_size={min_block_size}")
            seg.target = TORCH
    return segments


def merge_adjacent(segments: list[Segment]) -> list[Segment]:
    """Merge consecutive segments with the same target unless one is marked do_not_merge.
    Consecutive segments in a valid order stay valid when merged. Returns new segments."""
    merged: list[Segment] = []
    for seg in segments:
        if merged and merged[-1].target == seg.target and not (
                seg.do_not_merge or merged[-1].do_not_merge):
            merged[-1].nodes += seg.nodes
        else:
            merged.append(Segment(seg.target, list(seg.nodes), seg.do_not_merge))
    return merged


def after_min_block_size(segments: list[Segment], min_block_size: int) -> list[Segment]:
    """What ``segments`` become after min_block_size and merging, leaving them unchanged
    (for comparing plans before the driver applies the rules)."""
    copies = [Segment(s.target, list(s.nodes), s.do_not_merge) for s in segments]
    return merge_adjacent(apply_min_block_size(copies, min_block_size))


def attr_nbytes(gm: GraphModule, node: Node) -> int:
    """Bytes of the tensor a get_attr node fetches (0 for submodules and non-tensors)."""
    val = node.meta.get("val")
    if val is None:
        val = gm
        for part in str(node.target).split("."):
            val = getattr(val, part, None)
    return val.nbytes if hasattr(val, "nbytes") and hasattr(val, "dtype") else 0


def weights_of(nodes: list[Node]) -> dict[str, Node]:
    """The get_attr nodes that ``nodes`` read, by attribute name."""
    return {a.target: a for n in nodes for a in n.all_input_nodes if a.op == "get_attr"}


def fill_boundaries(gm: GraphModule, segments: list[Segment]) -> None:
    """Compute each segment's inputs (values it reads from outside, weights excluded),
    outputs (values used outside it), both in first-use order, and its weight bytes."""
    owner = {n: i for i, s in enumerate(segments) for n in s.nodes}
    for i, seg in enumerate(segments):
        inputs: dict[Node, None] = {}
        outputs: dict[Node, None] = {}
        weights: dict[str, Node] = {}
        for node in seg.nodes:
            for arg in node.all_input_nodes:
                if arg.op == "get_attr":
                    weights[arg.target] = arg
                elif owner.get(arg) != i:
                    inputs[arg] = None
            for user in node.users:
                if owner.get(user) != i:
                    outputs[node] = None
                    break
        seg.inputs, seg.outputs = list(inputs), list(outputs)
        seg.weight_bytes = sum(attr_nbytes(gm, a) for a in weights.values())


def boundary_violations(segments: list[Segment]) -> dict[Node, str]:
    """TensorRT segments may only exchange tensors with the rest of the graph. (Fusion
    groups keep non-tensor edges inside one unit; what is left are non-tensor graph inputs
    and non-tensor graph outputs.) Looks at segment boundaries only."""
    bad: dict[Node, str] = {}
    for seg in segments:
        if seg.target != TENSORRT:
            continue
        for node in seg.outputs:
            if not is_tensor_value(node):
                bad[node] = "its non-tensor value would leave a TensorRT segment"
        for value in seg.inputs:
            if not is_tensor_value(value):
                members = set(seg.nodes)
                for user in value.users:
                    if user in members:
                        bad[user] = "takes a non-tensor value from outside its TensorRT segment"
    return bad
