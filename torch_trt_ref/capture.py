"""Capture: torch.export of the user's model, with dynamic dims from ``Input`` ranges."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Sequence

import sympy
import torch
from torch.export import Dim, ExportedProgram

from .inputs import Input


def as_inputs(values: Sequence[Any]) -> list[Input]:
    """Input specs for positional example values (tensors become static Inputs)."""
    out = []
    for i, v in enumerate(values):
        if isinstance(v, Input):
            out.append(v)
        elif isinstance(v, torch.Tensor):
            out.append(Input.from_tensor(v))
        else:
            raise TypeError(f"input {i}: expected torch.Tensor or Input, got {type(v).__name__}")
    return out


def example_args(values: Sequence[Any], device="cpu") -> tuple:
    return tuple(v.example(device=device) if isinstance(v, Input) else v for v in values)


def dynamic_shapes_for(specs: dict[str, Input]) -> dict[str, Any] | None:
    """torch.export ``dynamic_shapes`` (by argument name) from Input ranges."""
    if not any(s.is_dynamic for s in specs.values()):
        return None
    shapes = {}
    for name, spec in specs.items():
        dims = {}
        for d in spec.dynamic_dims:
            # DYNAMIC (not a named Dim) lets export infer equalities between inputs.
            dims[d] = Dim.DYNAMIC(min=spec.min_shape[d], max=spec.max_shape[d])
        shapes[name] = dims or None
    return shapes


@contextmanager
def eval_mode(model: torch.nn.Module):
    """Export in eval mode, restoring every submodule's training flag afterwards."""
    flags = {m: m.training for m in model.modules()}
    model.eval()
    try:
        yield
    finally:
        for m, flag in flags.items():
            m.training = flag


@contextmanager
def stack_traces(record: bool):
    """Turn FX's per-node stack-trace recording on or off while tracing. Off saves
    ~0.3 ms per node (a traceback is extracted and symbolized for each): ~0.5 s of a
    BERT-base capture."""
    config = torch.fx.config
    if not hasattr(config, "do_not_emit_stack_traces"):
        yield
        return
    before = config.do_not_emit_stack_traces
    config.do_not_emit_stack_traces = not record
    try:
        yield
    finally:
        config.do_not_emit_stack_traces = before


def capture(model: torch.nn.Module | ExportedProgram, args: Sequence[Any],
            kwargs: dict[str, Any] | None = None,
            table: dict | None = None, record_stack_traces: bool = False) -> ExportedProgram:
    """torch.export ``model`` on example inputs made from ``args``/``kwargs`` (tensors or
    Inputs); dynamic Input ranges become export Dims. ``table`` is the decomposition table
    lowering will apply (see ``export_program``); ``record_stack_traces`` keeps each node's
    ``meta["stack_trace"]`` (off by default: it costs a traceback per node)."""
    if isinstance(model, ExportedProgram):
        return model
    kwargs = kwargs or {}
    import inspect

    params = list(inspect.signature(model.forward).parameters)
    specs = {params[i]: a for i, a in enumerate(args) if isinstance(a, Input)}
    specs.update({k: v for k, v in kwargs.items() if isinstance(v, Input)})
    dynamic = dynamic_shapes_for(specs)
    if dynamic is not None:
        names = params[: len(args)] + list(kwargs)
        dynamic = {n: dynamic.get(n) for n in names}
    ex_args = example_args(args)
    ex_kwargs = {k: (v.example() if isinstance(v, Input) else v) for k, v in kwargs.items()}
    with eval_mode(model), stack_traces(record_stack_traces):
        return export_program(model, ex_args, ex_kwargs, dynamic, table)


def export_program(model: torch.nn.Module, args: tuple, kwargs: dict, dynamic_shapes: Any,
                   table: dict | None = None) -> ExportedProgram:
    """Export ``model``. Given the decomposition ``table`` lowering will apply, the model is
    traced once straight to functional ATen IR, keeping whole the composite ops the table
    does not decompose, so lowering only retraces the few nodes still in the table
    (``decompose_locally``) instead of the whole program. This uses torch's private export
    entry point; where it is unavailable the public ``torch.export.export`` is used and
    lowering runs ``run_decompositions``."""
    with torch.no_grad():
        if table is not None:
            try:
                from torch.export._trace import _export

                from .lowering.decompositions import preserve_composites

                with preserve_composites(table):
                    ep = _export(model, args, kwargs, dynamic_shapes=dynamic_shapes,
                                 strict=False, pre_dispatch=False)
                ep._torch_trt_ref_aten_ir = True
                return ep
            except ImportError:
                pass
        return torch.export.export(model, args, kwargs, dynamic_shapes=dynamic_shapes,
                                   strict=False)


def symbol_ranges(gm: torch.fx.GraphModule, specs: Sequence[Input]) -> dict:
    """Map each export symbol to (min, opt, max) by matching placeholder dims to Inputs."""
    ranges: dict[sympy.Symbol, tuple[int, int, int]] = {}
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for node, spec in zip(placeholders, specs):
        val = node.meta.get("val")
        if not isinstance(val, torch.Tensor):
            continue
        for d, size in enumerate(val.shape):
            if isinstance(size, torch.SymInt) and isinstance(size.node.expr, sympy.Symbol):
                new = (spec.min_shape[d], spec.opt_shape[d], spec.max_shape[d])
                old = ranges.get(size.node.expr, new)  # equal dims: intersect the ranges
                lo, hi = max(old[0], new[0]), min(old[2], new[2])
                ranges[size.node.expr] = (lo, min(max(new[1], lo), hi), hi)
    return ranges
