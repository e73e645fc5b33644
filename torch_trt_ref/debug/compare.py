"""``compare``: compile a model, then run its lowered graph node by node (in the compile
precision and in float64) and its engines layer by layer (reference executor), map every
network tensor back to the FX node that produced it and report where error starts."""

from __future__ import annotations

import copy
import dataclasses
import math
import warnings
from dataclasses import dataclass
from typing import Any, Sequence

import torch
from torch.export import ExportedProgram
from torch.fx import GraphModule

from .. import accuracy
from ..capture import capture, example_args
from ..compiler import compile as compile_model
from ..conversion.registry import CONVERTERS, ConverterRegistry
from ..inputs import Input
from ..lowering import lower_program
from ..partitioning.stitch import segment_name
from ..runtime.module import EngineModule
from ..runtime.reference.executor import run_snapshot
from ..settings import CompilationSettings, op_name, settings_json
from .graphs import cast_graph, cast_value, flat_inputs, run_recording
from .lowering import check_lowering
from .report import DivergenceReport, ErrorStats, NodeRecord


@dataclass
class Trace:
    """Everything one ``compare`` run recorded: the compiled module, the lowered graph, and
    every node's value compiled, eager in the precision and in float64 (by node name)."""

    settings: CompilationSettings
    registry: ConverterRegistry
    compiled: GraphModule
    gm: GraphModule
    flat: list[Any]
    eager: dict[str, Any]
    ref: dict[str, Any]
    got: dict[str, Any]
    report: DivergenceReport


def compare(model: torch.nn.Module | ExportedProgram, inputs: Sequence[Any] = (),
            kwarg_inputs: dict[str, Any] | None = None, *,
            settings: CompilationSettings | None = None,
            registry: ConverterRegistry = CONVERTERS, check_model: bool = True,
            **kwargs) -> DivergenceReport:
    """Compile ``model`` and find the first FX node whose compiled value leaves the float64
    rule (``accuracy.allowed``). Settings as for ``torch_trt_ref.compile``. With
    ``check_model`` the lowered graph in float64 is also checked against the model in
    float64, so a wrong lowering is reported (and localized) too."""
    return trace(model, inputs, kwarg_inputs, settings=settings, registry=registry,
                 check_model=check_model, **kwargs).report


def trace(model, inputs=(), kwarg_inputs=None, *, settings=None, registry=CONVERTERS,
          check_model: bool = True, **kwargs) -> Trace:
    """``compare``, keeping the recorded values (``reduce`` cuts subgraphs with them)."""
    if settings is not None and kwargs:
        raise ValueError("pass either settings=CompilationSettings(...) or keyword settings")
    settings = settings or CompilationSettings.from_kwargs(**kwargs)
    args = example_args(list(inputs))
    kw = {k: v.example() if isinstance(v, Input) else v for k, v in (kwarg_inputs or {}).items()}
    ep = capture(model, args, kw, settings.record_stack_traces)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled = compile_model(ep, args, kw, settings=settings, registry=registry)
    gm = lowered_module(compiled) or lower_program(ep, settings)
    flat = flat_inputs(gm, args, kw)

    eager_out, eager = run_recording(gm, flat)
    ref_gm = gm if settings.precision == "fp32" else lower_program(
        ep, dataclasses.replace(settings, precision="fp32"))
    flat64 = [cast_value(x, torch.float64) for x in flat]
    ref_out, ref = run_recording(cast_graph(ref_gm), flat64)
    got_out, got, where = run_compiled(compiled, flat)

    report = DivergenceReport(settings_json(settings), [],
                              lowering_route=gm.meta.get("lowering", ""))
    report.nodes = node_records(gm, compiled, got, eager, ref, where)
    report.notes += [f"{name} runs in PyTorch: TensorRT compilation failed ({why})"
                     for name, why in compiled.compile_report.fallbacks.items()]
    if check_model:
        model_p, model64 = model_outputs(model if not isinstance(model, ExportedProgram)
                                         else model.module(), args, kw, settings.dtype)
        if model64 is None:
            report.notes.append("the model does not run in float64 eagerly; the outputs are "
                                "judged against the captured graph in float64")
            model_p, model64 = eager_out, ref_out
        report.outputs = accuracy.judge(got_out, _like(model_p, got_out), model64)
        report.lowering = check_lowering(ep, gm, ref, ref_out, model_p, model64, flat, settings)
    else:
        report.outputs = accuracy.judge(got_out, eager_out, ref_out)
    return Trace(settings, registry, compiled, gm, flat, eager, ref, got, report)


def lowered_module(compiled: GraphModule) -> GraphModule | None:
    """The lowered graph a compiled module was partitioned from."""
    for seg in compiled.partition_result.segments:
        for node in seg.nodes:
            return node.graph.owning_module
    return None


def run_compiled(compiled: GraphModule, flat: list[Any]):
    """Run the stitched module with every engine on the reference executor, recording
    each FX node's compiled value. Returns (flat outputs, node values, node -> (runs on,
    segment, converter))."""
    got: dict[str, Any] = {}
    where: dict[str, tuple[str, str, str | None]] = {}

    def on_call_module(target: str, module: torch.nn.Module, args: tuple):
        if isinstance(module, EngineModule):
            snapshot = module.engine.snapshot
            named = {spec.name: v.to(spec.dtype) for spec, v in zip(module.engine.inputs, args)}
            values: dict[str, torch.Tensor] = {}
            outputs = [o.contiguous() for o in run_snapshot(snapshot, named, values)]
            converters = getattr(snapshot, "node_converters", {})
            inputs = {spec.name for spec in module.engine.inputs}
            for node, names in getattr(snapshot, "node_outputs", {}).items():
                if node in inputs:  # a value computed upstream, not by this engine
                    continue
                vals = tuple(values.get(n) for n in names)
                got[node] = vals[0] if len(vals) == 1 else vals
                where[node] = ("tensorrt", target, converters.get(node))
            return outputs[0] if len(outputs) == 1 else tuple(outputs)
        if isinstance(module, GraphModule) and target.startswith("_run_on_"):
            out, _ = run_recording(module, list(args), got)
            for node in module.graph.nodes:
                if node.op == "call_function":
                    where[node.name] = ("pytorch", target, None)
            return out
        return module(*args)  # a segment of another backend (hierarchical)

    out, _ = run_recording(compiled, flat, {}, on_call_module)
    return out, got, where


def model_outputs(model: torch.nn.Module, args: tuple, kwargs: dict, dtype: torch.dtype):
    """The model's outputs run eagerly in ``dtype`` and in float64 (None when it cannot)."""
    def run(m, cast):
        with torch.no_grad():
            return accuracy.tensors(m(*[cast_value(a, cast) for a in args],
                                      **{k: cast_value(v, cast) for k, v in kwargs.items()}))
    try:
        model_p = run(model if dtype == torch.float32 else copy.deepcopy(model).to(dtype), dtype)
        model64 = run(copy.deepcopy(model).double(), torch.float64)
    except Exception:  # an op without a float64 (or half) kernel
        return None, None
    return model_p, model64


def _like(values, template) -> list:
    """``values`` with float tensors cast to the dtypes of ``template``'s tensors."""
    out = []
    for v, t in zip(accuracy.tensors(values), accuracy.tensors(template)):
        out.append(v.to(t.dtype) if v.is_floating_point() and t.is_floating_point() else v)
    return out


def node_records(gm: GraphModule, compiled: GraphModule, got: dict, eager: dict, ref: dict,
                 where: dict) -> list[NodeRecord]:
    """One record per call_function node of ``gm``, in topological order."""
    targets = {}
    for i, seg in enumerate(compiled.partition_result.segments):
        name = segment_name(i, seg)
        sub = getattr(compiled, name, None)
        runs_on = "tensorrt" if isinstance(sub, EngineModule) else (
            "pytorch" if seg.target in ("torch", "tensorrt") else seg.target)
        for node in seg.nodes:
            targets[node.name] = (runs_on, name, None)
    records = []
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        runs_on, segment, conv = where.get(node.name) or targets.get(node.name) or (
            "pytorch", None, None)
        val = node.meta.get("val")
        record = NodeRecord(node.name, op_name(node.target), runs_on, segment, conv,
                            str(getattr(val, "dtype", "")).replace("torch.", ""),
                            tuple(int(d) if isinstance(d, int) else -1
                                  for d in getattr(val, "shape", ())))
        _judge_node(record, got.get(node.name), eager.get(node.name), reference_value(node, ref))
        records.append(record)
    return records


def reference_value(node, ref: dict):
    """The float64 value of ``node``: its own, or (for a cast the precision pass inserted,
    absent from the fp32-lowered graph) the value of the node it casts."""
    while node.name not in ref and node.all_input_nodes:
        node = node.all_input_nodes[0]
    return ref.get(node.name)


def _judge_node(record: NodeRecord, got, eager, ref) -> None:
    if not all(isinstance(v, torch.Tensor) for v in (got, eager, ref)):
        if isinstance(eager, torch.Tensor) and got is None and record.runs_on == "tensorrt":
            record.note = "folded at conversion"
        elif not isinstance(eager, torch.Tensor):
            record.note = "not a tensor"
        else:
            record.note = "no value"
        return
    if got.shape != eager.shape:
        if got.numel() != eager.numel():
            record.within, record.note = False, f"shape {tuple(got.shape)}"
            return
        got = got.reshape(eager.shape)
    if ref.shape != eager.shape:
        record.note = "float64 shape differs"
        return
    got = got.to(eager.dtype)
    if not eager.is_floating_point() or not ref.is_floating_point():
        record.compiled, record.eager = ErrorStats.of(got, ref), ErrorStats.of(eager, ref)
        record.within = bool(torch.equal(got, eager))
        record.allowed_rmse = 0.0
        return
    # Positions holding a NaN or an infinity are judged one by one, as in accuracy.judge
    # (Note [NaN and infinity, position by position]), and left out of the RMSE.
    decided, failed = accuracy.nonfinite_positions(got, eager, ref, eager.dtype)
    if failed.any():
        record.within = False
        record.note = f"{int(failed.sum())} NaN/infinite element(s) not accepted"
        return
    if decided.any():
        got, eager, ref = got[~decided], eager[~decided], ref[~decided]
        record.note = f"{int(decided.sum())} NaN/infinite element(s) accepted"
    record.compiled, record.eager = ErrorStats.of(got, ref), ErrorStats.of(eager, ref)
    record.allowed_rmse = accuracy.allowed(record.eager.rmse, ref.double(), eager.dtype)
    record.within = not math.isnan(record.compiled.rmse) and (
        record.compiled.rmse <= record.allowed_rmse)
