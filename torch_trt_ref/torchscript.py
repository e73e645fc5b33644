"""TorchScript frontend: a scripted or traced module becomes an FX GraphModule through
torch's TorchScript-to-FX converter, tagged with the TorchScript module chain of each node,
which ``compile`` then exports like any nn.Module.

Route: ``torch._export.converter.TS2EPConverter`` collects the module's weights and the
inlined TorchScript graph, and its ``TS2FXGraphConverter`` turns that graph into FX, one
TorchScript node at a time. ``TS2EPConverter.convert()`` would then re-export the FX graph
with every dim ``Dim.AUTO`` (a batch of 1 becomes static there); instead the FX graph is
exported by our capture with the user's ``Input`` ranges, like any nn.Module. The FX nodes
are replayed by an ``fx.Interpreter`` under ``preserve_node_meta`` during that export, so
the module chain recorded here (``meta["custom"]``) reaches the exported nodes, where
``torch_executed_modules`` reads it (``partitioning/modules.py``)."""

from __future__ import annotations

import inspect
import re
from typing import Any, Sequence

import torch
import torch.fx.traceback as fx_traceback
from torch._export import converter as ts_converter

from .capture import MODULE_STACK

ROUTE = ("TorchScript -> FX by torch._export.converter.TS2FXGraphConverter, then "
         "torch.export with the declared Inputs")

# "SELF(ResNet).layer1(Sequential).0(BasicBlock).bn1(BatchNorm2d).UNKNOWN_INSTANCE(...)"
_ENTRY = re.compile(r"([^.()]+)\(([^()]*)\)")


def is_torchscript(model: Any) -> bool:
    return isinstance(model, (torch.jit.ScriptModule, torch.jit.ScriptFunction))


def _type_names(model) -> dict[str, str]:
    """Submodule path -> qualified Python type name ("torchvision.models.resnet.BasicBlock";
    TorchScript's "__torch__." prefix and the "___torch_mangle_N" of traced types removed)."""
    if isinstance(model, torch.jit.ScriptFunction):
        return {}
    out = {}
    for path, module in model.named_modules():
        name = module._c._type().qualified_name().removeprefix("__torch__.")
        out[path] = re.sub(r"___torch_mangle_\d+\.", "", name)
    return out


def _module_chain(hierarchy: str, types_by_path: dict[str, str]) -> list[tuple[str, str]]:
    """Parse ``Node.getModuleHierarchy()`` into (path, qualified type) pairs, root first.
    Scripted graphs start with "SELF(<root type>)", traced ones with the first child; calls
    TorchScript cannot name (a functional call inside a module) end the chain."""
    chain = [("", types_by_path.get("", ""))]
    path = ""
    for name, kind in _ENTRY.findall(hierarchy):
        if name == "SELF":
            continue
        if name == "UNKNOWN_INSTANCE":
            break
        path = f"{path}.{name}" if path else name
        chain.append((path, types_by_path.get(path, kind)))
    return chain


class _TaggingConverter(ts_converter.TS2FXGraphConverter):
    """TS2FXGraphConverter that records on each FX node it creates the module chain of the
    TorchScript node it came from."""

    types_by_path: dict[str, str] = {}

    def convert_node(self, node: torch._C.Node):
        last = self.fx_graph._root.prev
        super().convert_node(node)
        chain = _module_chain(node.getModuleHierarchy(), self.types_by_path)
        new = last.next
        while new is not self.fx_graph._root:
            new.meta.setdefault("custom", {})[MODULE_STACK] = chain
            new = new.next


def to_graph_module(model, example_args: Sequence[Any],
                    kwarg_inputs: dict[str, Any] | None = None) -> torch.fx.GraphModule:
    """The FX GraphModule of a ScriptModule or ScriptFunction (see the module docstring);
    it takes the same positional inputs. ``example_args`` are tensors of the input shapes
    (TorchScript's graph is specialized to them only for shape propagation)."""
    if kwarg_inputs:
        raise ValueError("a TorchScript model takes its inputs positionally: pass "
                         f"inputs=(...) instead of kwarg_inputs={sorted(kwarg_inputs)}")
    frontend = ts_converter.TS2EPConverter(model, tuple(example_args))
    lifted, attr_names = ts_converter.get_block_to_lifted_attrs(frontend.ts_graph)
    graph_converter = _TaggingConverter(
        frontend.ts_graph, frontend.name_to_param, frontend.name_to_buffer, lifted,
        frontend.name_to_non_tensor_attributes, frontend.name_to_constant, attr_names)
    graph_converter.types_by_path = _type_names(model)
    gm = graph_converter.convert()
    ts_converter.replace_quantized_ops_with_standard_ops(gm)
    gm.forward = replaying_forward(gm)
    return gm


def replaying_forward(gm: torch.fx.GraphModule):
    """A forward that runs the graph node by node, so that a tracer sees each node's meta
    (``custom`` included); its signature names the graph's inputs, as export needs."""
    names = [n.target for n in gm.graph.nodes if n.op == "placeholder"]

    def forward(*args):
        with fx_traceback.preserve_node_meta():
            return torch.fx.Interpreter(gm).run(*args)

    forward.__signature__ = inspect.Signature(
        [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in names])
    return forward
