"""Stitching: the one function that turns a ``PartitionResult`` into a GraphModule whose
segments are submodules ``_run_on_<target>_<i>``, called in segment order; and the pickling
of that module, which ``torch.save``, ``pickle`` and ``torch_trt_ref.save`` use."""

from __future__ import annotations

import operator
from dataclasses import dataclass

import torch
from torch.fx import Graph, GraphModule, Node
from torch.fx._lazy_graph_module import _LazyGraphModule
from torch.fx.node import map_aggregate, map_arg

from ..errors import SerializationError
from ..library_ops import library_ops, require
from .result import PartitionResult, Segment


class PartitionedModule(GraphModule):
    """The stitched module. Pickling (``torch.save``, ``pickle``, ``torch_trt_ref.save``)
    keeps its graph node by node (``reduce_partitioned``): GraphModule's own
    pickling re-traces the generated code, which loses the calling convention (a
    ``ModelOutput`` would come back as a dict)."""

    def __reduce__(self):
        return reduce_partitioned(self)


# -- pickling the stitched module ----------------------------------------------------------
@dataclass(frozen=True)
class _NodeRef:
    name: str


# GraphModule attributes that ``recompile`` derives from the graph and its codegen.
_DERIVED = {"_graph", "_code", "_lineno_map", "_prologue_start", "_in_spec", "_out_spec"}


def reduce_partitioned(module: GraphModule):
    """Pickle a stitched module as its graph's nodes plus its codegen (torch.export's
    pytree calling convention) plus every attribute but ``partition_result``: its segments
    hold FX nodes of the lowered graph, which a compiled module does not keep (the same
    partition, as data, is ``compile_report.partition``); loaded modules have None."""
    nodes = [(n.op, n.name, n.target, map_arg(n.args, _ref), map_arg(n.kwargs, _ref), n.type)
             for n in module.graph.nodes]
    state = {k: v for k, v in module.__dict__.items()
             if k not in _DERIVED and k != "partition_result"}
    ops = library_ops(module)
    if ops:  # unpickled first: imports what registers them (Note [Library ops in a saved
        # program] in library_ops.py)
        return _rebuild_requiring, (_Requires(ops), state, nodes, module.graph._codegen)
    return _rebuild_partitioned, (state, nodes, module.graph._codegen)


class _Requires:
    """Pickles as a call of ``_require_ops``: unpickling it registers the library ops."""

    def __init__(self, ops: dict[str, str | None]):
        self.ops = ops

    def __reduce__(self):
        return _require_ops, (self.ops,)


def _require_ops(ops: dict[str, str | None]) -> dict[str, str | None]:
    return require(ops, SerializationError)


def _rebuild_requiring(ops, state: dict, nodes: list, codegen) -> GraphModule:
    return _rebuild_partitioned(state, nodes, codegen)


def _ref(node) -> _NodeRef:
    return _NodeRef(node.name)


def _rebuild_partitioned(state: dict, nodes: list, codegen) -> GraphModule:
    graph = Graph()
    env = {}

    def resolve(value):
        return env[value.name] if isinstance(value, _NodeRef) else value

    for op, name, target, args, kwargs, type_ in nodes:
        env[name] = graph.create_node(op, target, map_aggregate(args, resolve),
                                      map_aggregate(kwargs, resolve), name, type_)
    graph._codegen = codegen
    module = PartitionedModule.__new__(PartitionedModule)
    module.__dict__.update(state)
    module.partition_result = None
    module.graph = graph  # recompiles: forward, _in_spec and _out_spec from the codegen
    return module


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
