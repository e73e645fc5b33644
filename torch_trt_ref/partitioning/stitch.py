"""Stitching: the one function that turns a ``PartitionResult`` into a GraphModule whose
segments are submodules ``_run_on_<target>_<i>``, called in segment order."""

from __future__ import annotations

import operator

import torch
from torch.fx import Graph, GraphModule, Node
from torch.fx._lazy_graph_module import _LazyGraphModule

from .result import PartitionResult, Segment


class PartitionedModule(GraphModule):
    """The stitched module. Pickling (``torch.save``, ``pickle``, ``torch_trt_ref.save``)
    keeps its graph node by node (``serialize.reduce_partitioned``): GraphModule's own
    pickling re-traces the generated code, which loses the calling convention (a
    ``ModelOutput`` would come back as a dict)."""

    def __reduce__(self):
        from ..serialize import reduce_partitioned

        return reduce_partitioned(self)


def segment_name(index: int, segment: Segment) -> str:
    return f"_run_on_{segment.target}_{index}"


def _segment_module(gm: GraphModule, seg: Segment) -> GraphModule:
    graph = Graph()
    env: dict[Node, Node] = {}
    for node in seg.inputs:
        env[node] = graph.placeholder(node.name)
        env[node].meta = dict(node.meta)

    def lookup(n: Node) -> Node:
        if n not in env and n.op == "get_attr":
            env[n] = graph.get_attr(n.target)
            env[n].meta = dict(n.meta)
        return env[n]

    for node in seg.nodes:
        env[node] = graph.node_copy(node, lookup)
    outs = [env[n] for n in seg.outputs]
    graph.output(outs[0] if len(outs) == 1 else tuple(outs))
    # A TensorRT segment's Python code is only needed if its engine fails to build: it is
    # generated on first use (torch's _LazyGraphModule), not for every segment now.
    cls = _LazyGraphModule if seg.target == "tensorrt" else GraphModule
    return cls(gm, graph, class_name=f"Segment_{seg.target}")


def stitch(gm: GraphModule, result: PartitionResult) -> GraphModule:
    """Build the partitioned module. Placeholders, the output node and the calling
    convention (pytree codegen) of ``gm`` are kept, so it takes and returns the same
    structures as ``gm``."""
    graph = Graph()
    env: dict[Node, Node] = {}
    root = torch.nn.Module()

    def lookup(n: Node) -> Node:
        if n not in env and n.op == "get_attr":
            env[n] = graph.get_attr(n.target)
            env[n].meta = dict(n.meta)
        return env[n]

    for node in gm.graph.nodes:
        if node.op == "placeholder":
            env[node] = graph.node_copy(node, lookup)
    for i, seg in enumerate(result.segments):
        name = segment_name(i, seg)
        root.add_module(name, _segment_module(gm, seg))
        call = graph.call_module(name, tuple(env[n] for n in seg.inputs))
        if len(seg.outputs) == 1:
            env[seg.outputs[0]] = call
            call.meta = dict(seg.outputs[0].meta)
        else:
            for k, out in enumerate(seg.outputs):
                env[out] = graph.call_function(operator.getitem, (call, k))
                env[out].meta = dict(out.meta)
    output = next(n for n in gm.graph.nodes if n.op == "output")
    graph.node_copy(output, lookup)
    graph._codegen = gm.graph._codegen
    for node in graph.nodes:  # weights used directly by the output stay on the parent
        if node.op == "get_attr":
            _copy_attr(gm, root, node.target)
    stitched = PartitionedModule(root, graph, class_name="PartitionedModule")
    for attr in ("_in_spec", "_out_spec", "meta"):
        if hasattr(gm, attr):
            setattr(stitched, attr, getattr(gm, attr))
    return stitched


def _copy_attr(src: torch.nn.Module, dst: torch.nn.Module, target: str) -> None:
    *path, last = target.split(".")
    for part in path:
        src = getattr(src, part)
        if not hasattr(dst, part):
            dst.add_module(part, torch.nn.Module())
        dst = getattr(dst, part)
    setattr(dst, last, getattr(src, last))
