"""Autocast (the peer's 2.10 ``enable_autocast``): in an fp32 compile, each float node
computes in fp16/bf16 unless a rule keeps it in fp32; and fp32 accumulation
(``use_fp32_acc``): matmuls of half inputs compute in fp32. Every decision is recorded
with its reason (``gm.meta["autocast"]``, shown in the compile report).

Note [Autocast rules]: the first rule that matches decides, in this order:
1. the node's name or module path matches a regex of ``autocast_excluded_nodes``;
2. its op is in ``autocast_excluded_ops``;
3. on the calibration batches (``autocast_calibration_dataloader``, run eagerly in fp32),
   the largest |value| of its output or of one of its inputs exceeds
   ``autocast_max_output_threshold`` (fp16 overflows at 65504, and intermediate sums of a
   large output sooner; a large input would overflow in its cast to fp16);
4. it accumulates over many values: normalization statistics, softmax, reductions
   (``SENSITIVE``), where users expect fp32 (D6);
5. otherwise it computes in the low precision.
A node that sets its own dtype (``_to_copy(dtype=...)``, a factory with ``dtype``) keeps
it. Casts go where a value meets a node of another precision; weights feeding a
low-precision node are cast once, as ``cast_precision`` casts them (so refit replays it);
the outputs return to the dtypes the model gives.
"""

from __future__ import annotations

import operator
import re

import torch
from torch.fx import GraphModule, Node

from ..settings import CompilationSettings, matches_op, op_name
from .precision import FLOATS, _cast_view, _clamp_scalar

aten = torch.ops.aten
SENSITIVE = {
    aten.native_layer_norm.default, aten.layer_norm.default, aten.native_group_norm.default,
    aten.group_norm.default, aten._native_batch_norm_legit_no_training.default,
    aten.batch_norm.default, aten._softmax.default, aten.softmax.int,
    aten._log_softmax.default, aten.log_softmax.int, aten.var.correction,
    aten.var_mean.correction, aten.mean.dim, aten.sum.dim_IntList, aten.sum.default,
    aten.cumsum.default, aten.logsumexp.default, aten.norm.ScalarOpt_dim,
    aten.linalg_vector_norm.default, aten.rms_norm.default,
}
MATMULS = {aten.mm.default, aten.addmm.default, aten.bmm.default, aten.baddbmm.default,
           aten.matmul.default, aten.linear.default}


def _floats(val) -> bool:
    vals = val if isinstance(val, (tuple, list)) else [val]
    return any(isinstance(v, torch.Tensor) and v.dtype in FLOATS for v in vals)


def _module_path(node: Node) -> str:
    stack = node.meta.get("nn_module_stack") or {}
    return next(reversed(stack.values()))[0] if stack else ""


def calibrate(gm: GraphModule, batches) -> dict[str, float]:
    """The largest |value| of each node's float outputs over ``batches`` (each a tensor or
    a tuple of the positional inputs), the graph run eagerly as it is (fp32)."""
    peaks: dict[str, float] = {}

    class Recorder(torch.fx.Interpreter):
        def run_node(self, n):
            out = super().run_node(n)
            vals = out if isinstance(out, (tuple, list)) else [out]
            for v in vals:
                if isinstance(v, torch.Tensor) and v.dtype in FLOATS and v.numel():
                    peak = float(v.detach().abs().nan_to_num(posinf=torch.inf).max())
                    peaks[n.name] = max(peaks.get(n.name, 0.0), peak)
            return out

    with torch.no_grad():
        for batch in batches:
            flat = torch.utils._pytree.tree_leaves(batch)
            Recorder(gm).run(*flat)
    return peaks


def decide(node: Node, settings: CompilationSettings, peaks: dict[str, float] | None
           ) -> tuple[str, str]:
    """(``"low"`` or ``"fp32"``, the reason) for one float node (Note [Autocast rules])."""
    path = _module_path(node)
    for pattern in sorted(settings.autocast_excluded_nodes):
        if re.search(pattern, node.name) or (path and re.search(pattern, path)):
            return "fp32", f"autocast_excluded_nodes {pattern!r} matches {node.name} ({path})"
    if matches_op(node.target, settings.autocast_excluded_ops):
        return "fp32", f"autocast_excluded_ops names {op_name(node.target)}"
    if peaks is not None:
        limit = settings.autocast_max_output_threshold
        ios = [("output", node.name)] + [("input", n.name) for n in node.all_input_nodes]
        for what, name in ios:
            if peaks.get(name, 0.0) > limit:
                return "fp32", (f"max |{what}| {peaks[name]:.3g} ({name}) on the calibration "
                                f"data > autocast_max_output_threshold {limit:g}")
    if node.target in SENSITIVE:
        return "fp32", "accumulates over many values (normalization, softmax, reduction)"
    return "low", "default"


def autocast(gm: GraphModule, settings: CompilationSettings) -> GraphModule:
    """Choose fp32 or the low precision per float node and put casts where values cross.

    Before: ``h = linear(x, w); y = layer_norm(h)`` (all fp32)
    After:  ``x16 = _to_copy(x, f16); h = linear(x16, w_f16);
    h32 = _to_copy(h, f32); y = layer_norm(h32)``"""
    if not settings.enable_autocast:
        return gm
    loader = settings.autocast_calibration_dataloader
    peaks = calibrate(gm, loader) if loader is not None else None
    rewrite = _Rewrite(gm, settings)
    decisions = []
    for node in list(gm.graph.nodes):
        if node.op == "output":
            rewrite.restore_outputs(node)
        elif node.op == "call_function":
            decisions.append(rewrite.visit(node, peaks))
    gm.meta["autocast"] = [d for d in decisions if d is not None]
    return gm


class _Rewrite:
    """The casts of one autocast pass: the dtype each value has now, one cast per (value,
    dtype), one cast copy per weight storage."""

    def __init__(self, gm: GraphModule, settings: CompilationSettings):
        self.gm, self.settings, self.low = gm, settings, settings.autocast_dtype
        self.dtype: dict[Node, torch.dtype] = {}
        self.casts: dict[tuple[Node, torch.dtype], Node] = {}
        self.storages: dict = {}

    def now(self, node: Node) -> torch.dtype | None:
        if node in self.dtype:
            return self.dtype[node]
        val = node.meta.get("val")
        return val.dtype if isinstance(val, torch.Tensor) and val.dtype in FLOATS else None

    def cast(self, value, dtype: torch.dtype, user: Node):
        if not isinstance(value, Node) or self.now(value) in (None, dtype):
            return value
        if value.op == "get_attr" and dtype == self.low:
            tensor = operator.attrgetter(value.target)(self.gm)
            name = value.target.replace(".", "_") + f"_{self.settings.autocast_low_precision_type}"
            if not hasattr(self.gm, name):
                self.gm.register_buffer(name, _cast_view(tensor, dtype, self.storages))
            key = (value, dtype)
            if key not in self.casts:
                with self.gm.graph.inserting_before(user):
                    self.casts[key] = self.gm.graph.get_attr(name)
                self.dtype[self.casts[key]] = dtype
            return self.casts[key]
        key = (value, dtype)
        if key not in self.casts:
            with self.gm.graph.inserting_after(value):
                self.casts[key] = self.gm.graph.call_function(
                    aten._to_copy.default, (value,), {"dtype": dtype})
            self.dtype[self.casts[key]] = dtype
        return self.casts[key]

    def visit(self, node: Node, peaks) -> dict | None:
        val = node.meta.get("val")
        if node.target is operator.getitem:
            parent = node.args[0]
            if isinstance(parent, Node) and parent in self.dtype and _floats(val):
                self.dtype[node] = self.dtype[parent]
            return None
        if not _floats(val) or node.kwargs.get("dtype") in FLOATS:
            return None
        choice, reason = decide(node, self.settings, peaks)
        dtype = self.low if choice == "low" else torch.float32
        acc = choice == "low" and self.settings.use_fp32_acc and node.target in MATMULS
        if acc:
            self._inputs(node, self.low)  # values rounded to the low precision ...
            self._inputs(node, torch.float32)  # ... multiplied and summed in fp32
            self._output_to(node, self.low)
            reason = "fp32 accumulation of low-precision inputs (use_fp32_acc)"
        else:
            self._inputs(node, dtype)
            self.dtype[node] = dtype
        if dtype != torch.float32:
            node.args = tuple(_clamp_scalar(a, dtype) for a in node.args)
        name = self.settings.autocast_low_precision_type if choice == "low" else "fp32"
        return {"node": node.name, "op": op_name(node.target), "dtype": name,
                "reason": reason, "module": _module_path(node)}

    def _inputs(self, node: Node, dtype: torch.dtype) -> None:
        node.args = torch.fx.map_arg(node.args, lambda a: self.cast(a, dtype, node))
        node.kwargs = torch.fx.map_arg(node.kwargs, lambda a: self.cast(a, dtype, node))

    def _output_to(self, node: Node, dtype: torch.dtype) -> None:
        self.dtype[node] = torch.float32
        with self.gm.graph.inserting_after(node):
            cast = self.gm.graph.call_function(aten._to_copy.default, (node,), {"dtype": dtype})
        node.replace_all_uses_with(cast, delete_user_cb=lambda u: u is not cast)
        self.dtype[cast] = dtype

    def restore_outputs(self, node: Node) -> None:
        """Each float output returns to the dtype the model gives it."""
        def back(value):
            if not isinstance(value, Node):
                return value
            val = value.meta.get("val")
            want = val.dtype if isinstance(val, torch.Tensor) else None
            return self.cast(value, want, node) if want in FLOATS else value
        node.args = torch.fx.map_arg(node.args, back)


def fp32_accumulation(gm: GraphModule, settings: CompilationSettings) -> GraphModule:
    """``use_fp32_acc`` in an fp16/bf16 compile (autocast does its own): each matmul's
    half inputs are cast to fp32, and its fp32 result back to the compile precision.

    Before: ``y = mm(a16, b16)``
    After:  ``y32 = mm(_to_copy(a16, f32), _to_copy(b16, f32)); y = _to_copy(y32, f16)``"""
    if not settings.use_fp32_acc or settings.enable_autocast or settings.precision == "fp32":
        return gm
    graph, target = gm.graph, settings.dtype
    for node in [n for n in graph.nodes if n.op == "call_function" and n.target in MATMULS]:
        def up(arg, node=node):
            val = arg.meta.get("val") if isinstance(arg, Node) else 0
            if val is not None and not _floats(val):  # None: a cast cast_precision added
                return arg
            with graph.inserting_before(node):
                return graph.call_function(aten._to_copy.default, (arg,),
                                           {"dtype": torch.float32})
        node.args = torch.fx.map_arg(node.args, up)
        node.kwargs = torch.fx.map_arg(node.kwargs, up)
        with graph.inserting_after(node):
            cast = graph.call_function(aten._to_copy.default, (node,), {"dtype": target})
        node.replace_all_uses_with(cast, delete_user_cb=lambda u: u is not cast)
    return gm
