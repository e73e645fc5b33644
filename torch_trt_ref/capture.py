"""Capture: torch.export of the user's model, with dynamic dims from ``Input`` ranges."""

from __future__ import annotations

import functools
import os
import re
import traceback
from contextlib import contextmanager
from typing import Any, Sequence
from unittest import mock

import torch
import torch.fx.experimental._config as fx_config
from torch.export import Dim, ExportedProgram
from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode, ShapeEnv

from .capture_errors import data_dependent_message
from .inputs import Input
from .resized_inputs import resized_input_error, unwrite_resized_inputs

# meta["custom"] key of a node's module chain: [(path, qualified type name), ...], root
# first; set by the front ends that lose torch's nn_module_stack (TorchScript, dynamo)
MODULE_STACK = "torch_trt_ref.module_stack"


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


# Note [Tracing dynamic dims]: torch.export specializes a dim whose example size is 0 or 1
# (0/1 specialization) and otherwise assumes every dynamic dim is >= 2, so the range most
# deployments declare, batch min=1 opt=1 max=8, either fails ("0/1 specialized due to hint
# of 1") or, traced at 2, has its min silently raised to 2 (a range 1..2 collapses to the
# static size 2). So each dynamic dim is traced at an in-range size >= 2 (its opt when it is
# one), and when a declared min is 0 or 1 export runs size-oblivious
# (``backed_size_oblivious``): sizes are not assumed to be >= 2 and branches on "is this
# size 1?" take the general path, which is also right at 0 and 1 for the ops export keeps.
# The declared min/opt/max, not the traced size, make the optimization profile
# (``ranges.symbol_ranges``); compiled dynamic modules are checked at min, opt and max in tests.

def trace_shape(spec: Input, at: str = "opt_shape") -> tuple[int, ...]:
    """The example shape ``spec`` is traced at: opt (or ``at``: "max_shape", "min_shape"),
    with every dynamic dim whose size there is 0 or 1 moved to the smallest in-range size
    >= 2 (Note [Tracing dynamic dims])."""
    shape = list(getattr(spec, at))
    for d in spec.dynamic_dims:
        if shape[d] < 2:
            shape[d] = min(max(2, spec.min_shape[d]), spec.max_shape[d])
    return tuple(shape)


def example_args(values: Sequence[Any], device="cpu") -> tuple:
    return tuple(v.example(trace_shape(v), device=device) if isinstance(v, Input) else v
                 for v in values)


def dynamic_shapes_for(specs: dict[str, Input]) -> dict[str, Any] | None:
    """torch.export ``dynamic_shapes`` (by argument name) from Input ranges. Dims named in
    ``shared_dims`` become one named ``Dim`` per name (``shared_dim``); the others are
    ``Dim.DYNAMIC``, which lets export infer equalities between inputs."""
    if not any(s.is_dynamic for s in specs.values()):
        return None
    shapes, named = {}, {}
    for name, spec in specs.items():
        dims, tags = {}, dict(spec.shared_dims)
        for d in spec.dynamic_dims:
            if d in tags:
                dims[d] = shared_dim(named, tags[d], spec, name, d)
            else:
                dims[d] = Dim.DYNAMIC(min=spec.min_shape[d], max=spec.max_shape[d])
        shapes[name] = dims or None
    return shapes


def shared_dim(named: dict[str, tuple], tag: str, spec: Input, where: str, d: int) -> Any:
    """The one ``Dim`` of shared-dim name ``tag`` (made at its first use, kept in
    ``named``); a second declaration with another min/opt/max is a ValueError naming
    both."""
    declared = (spec.min_shape[d], spec.opt_shape[d], spec.max_shape[d])
    if tag not in named:
        named[tag] = (Dim(tag, min=declared[0], max=declared[2]), declared, where, d)
    dim, first, first_where, first_d = named[tag]
    if declared != first:
        raise ValueError(
            f"shared dim {tag!r}: input {where!r} dim {d} declares min/opt/max {declared}, "
            f"input {first_where!r} dim {first_d} declares {first}; axes that share a name "
            "are one size, so they must declare one range (or use different names)")
    return dim


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
            record_stack_traces: bool = False) -> ExportedProgram:
    """torch.export ``model`` on example inputs made from ``args``/``kwargs`` (tensors or
    Inputs); dynamic Input ranges become export Dims. ``record_stack_traces`` keeps each
    node's ``meta["stack_trace"]`` (off by default: it costs a traceback per node)."""
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
    oblivious = any(s.min_shape[d] < 2 for s in specs.values() for d in s.dynamic_dims)
    with eval_mode(model), stack_traces(record_stack_traces):
        ex_args, ex_kwargs = _examples(args, kwargs, "opt_shape")
        try:
            return _capture_at(model, args, kwargs, ex_args, ex_kwargs, dynamic, oblivious,
                               specs, params)
        except Exception as err:
            if dynamic is None or _eager_error(model, ex_args, ex_kwargs) is None:
                raise  # eager runs where export failed: the export error is the answer
            at = _where_eager_runs(model, args, kwargs, err)
        try:  # Note [Tracing where eager runs]
            return _capture_at(model, args, kwargs, *_examples(args, kwargs, at), dynamic,
                               oblivious, specs, params)
        except DynamicShapeError as forced:
            forced.traced_at = at
            raise


# Note [Tracing where eager runs]: a model is traced at its declared opt sizes (Note [Tracing
# dynamic dims]); where eager itself raises there, so does export (``native_group_norm``
# with N and HxW passed as the ints of one example runs only where x.numel() == N*C*HxW,
# which Torch-TensorRT's own dynamic group norm tests declare at max only). Then the model
# is traced at max, else at min, whichever eager runs at; size cover (size_cover.py) finds
# the declared sizes where the traced graph does not hold and runs eager there. A dim the
# model then fixes is compiled at that size alone when eager runs at no other (the module
# raises elsewhere as eager does, and a warning names the dim and the line), where at a
# declared opt that eager runs it is a DynamicShapeError: the opt contradicts no size eager
# runs, so the declaration, not the range, is what the user must change. Where eager raises
# at opt, max and min alike, the error says so, with eager's message.


def _examples(args: Sequence[Any], kwargs: dict[str, Any], at: str) -> tuple[tuple, dict]:
    """Example values for ``args``/``kwargs``: each Input at ``trace_shape(spec, at)``."""
    return (tuple(v.example(trace_shape(v, at)) if isinstance(v, Input) else v for v in args),
            {k: (v.example(trace_shape(v, at)) if isinstance(v, Input) else v)
             for k, v in kwargs.items()})


def _eager_error(model, args: tuple, kwargs: dict) -> str | None:
    """None when eager runs ``model`` on these examples, else its error."""
    try:
        with torch.no_grad():
            model(*args, **kwargs)
    except Exception as err:  # noqa: BLE001  (what eager raises is the answer)
        return f"{type(err).__name__}: {err}"
    return None


def _where_eager_runs(model, args, kwargs, err: Exception) -> str:
    """"max_shape" or "min_shape", the first declared shape eager runs at (Note [Tracing
    where eager runs]); else a ValueError with eager's error at opt."""
    with torch.random.fork_rng(devices=[]):
        for at in ("max_shape", "min_shape"):
            torch.manual_seed(0)
            if _eager_error(model, *_examples(args, kwargs, at)) is None:
                return at
        torch.manual_seed(0)
        why = _eager_error(model, *_examples(args, kwargs, "opt_shape"))
    shapes = "; ".join(f"input {i}: min {v.min_shape}, opt {v.opt_shape}, max {v.max_shape}"
                       for i, v in enumerate([*args, *kwargs.values()]) if isinstance(v, Input))
    raise ValueError(f"the model raises in eager at the declared opt, max and min shapes "
                     f"({shapes}), so it cannot be traced there: {why}. Accepted: declare "
                     f"shapes at which the model runs in eager (at least the opt shape)") from err


def _capture_at(model, args, kwargs, ex_args, ex_kwargs, dynamic, oblivious, specs,
                params) -> ExportedProgram:
    """torch.export at the example values ``ex_args``/``ex_kwargs``, with its errors said in
    the user's terms."""
    try:
        return unwrite_resized_inputs(
            export_program(model, ex_args, ex_kwargs, dynamic, oblivious))
    except GuardOnDataDependentSymNode as err:  # bool(tensor), not tensor, if on values
        raise ValueError(data_dependent_message(err)) from err
    except IndexError as err:  # torch.export's guards of an input resized to another rank
        why = resized_input_error(model, ex_args, ex_kwargs, params)
        if why is None:
            raise
        raise ValueError(why) from err
    except (torch._dynamo.exc.UserError, ValueError) as err:
        forced = _forced_static(err, specs)
        if not forced:
            raise
        lines = _specializing_lines(model, ex_args, ex_kwargs, dynamic, oblivious)
        names = params[: len(args)] + list(kwargs)
        traced = {**dict(zip(params, ex_args)), **ex_kwargs}
        dims = [(names.index(n), d, int(traced[n].shape[d])) for n, d in forced]
        raise DynamicShapeError(_describe_forced(forced, specs, lines), dims) from err


class DynamicShapeError(ValueError):
    """A dim declared dynamic that the model itself forces to one size. ``dims`` holds
    (input index, dim, size it was traced at) of each such dim; ``traced_at`` the declared
    shape the inputs were traced at ("opt_shape", or where eager raises there: Note
    [Tracing where eager runs])."""

    def __init__(self, message: str, dims: Sequence[tuple[int, int, int]] = ()):
        super().__init__(message)
        self.dims = list(dims)
        self.traced_at = "opt_shape"


_SOURCE = re.compile(r"(?:L\['(\w+)'\]\.size\(\)|inputs\['(\w+)'\]\.shape)\[(\d+)\]")


def _forced_static(err: Exception, specs: dict[str, Input]) -> list[tuple[str, int]]:
    """(input name, dim) of every declared-dynamic dim torch.export's error says the model
    specialized; empty when the error is about something else."""
    text = str(err)
    if "specialized" not in text and "static shape" not in text:
        return []
    found = []
    for m in _SOURCE.finditer(text):
        name, dim = m.group(1) or m.group(2), int(m.group(3))
        if name in specs and dim in specs[name].dynamic_dims and (name, dim) not in found:
            found.append((name, dim))
    return found


def _user_frame() -> str | None:
    """The innermost frame of the current stack outside torch and this package."""
    skip = (os.path.dirname(torch.__file__), os.path.dirname(__file__),
            os.path.dirname(os.__file__))
    for frame in reversed(traceback.extract_stack()):
        if not frame.filename.startswith(skip):
            code = f": {frame.line.strip()}" if frame.line else ""
            return f"{frame.filename}:{frame.lineno}{code}"
    return None


def _specializing_lines(model, args, kwargs, dynamic, oblivious) -> dict[str, str]:
    """Export once more with the dims left to torch (Dim.AUTO), recording the model line at
    which each symbol was replaced by a constant: symbol name -> "file:line: code". Only
    run on the error path."""
    lines: dict[str, str] = {}
    original = ShapeEnv._set_replacement

    def record(self, a, tgt, msg):
        if tgt.is_number and str(a) not in lines:
            lines[str(a)] = (_user_frame() or "?") + f" (size {tgt})"
        return original(self, a, tgt, msg)

    auto = {name: (None if dims is None else {d: Dim.AUTO for d in dims})
            for name, dims in dynamic.items()}
    try:
        with mock.patch.object(ShapeEnv, "_set_replacement", record):
            export_program(model, args, kwargs, auto, oblivious)
    except Exception:  # noqa: BLE001  (the first error is the one reported)
        return {}
    return lines


def _describe_forced(forced, specs: dict[str, Input], lines: dict[str, str]) -> str:
    where = "; ".join(sorted(set(lines.values()))) or "a line torch did not record"
    dims = ", ".join(
        f"input '{name}' dim {d} (declared min={specs[name].min_shape[d]}, "
        f"opt={specs[name].opt_shape[d]}, max={specs[name].max_shape[d]})"
        for name, d in forced)
    return (f"the model fixes the size of {dims}, so it cannot be dynamic. The size was "
            f"fixed at {where}. Accepted: declare that dim static (min = opt = max = the "
            f"size above), or change the model line so the dim may vary.")


def export_program(model: torch.nn.Module, args: tuple, kwargs: dict,
                   dynamic_shapes: Any, size_oblivious: bool = False) -> ExportedProgram:
    """Export ``model`` (non-strict) to torch.export's pre-dispatch IR: composite ops such as
    ``linear`` stay whole and the model's forward is traced once. (Tracing straight to
    functional ATen IR traces it twice, once to collect metadata: ~1.1 s instead of ~0.5 s
    on BERT-base.) Lowering decomposes what it must node by node; see ``lower_program``.
    ``size_oblivious``: Note [Tracing dynamic dims]."""
    with torch.no_grad(), fx_config.patch(backed_size_oblivious=size_oblivious):
        return torch.export.export(model, args, kwargs, dynamic_shapes=dynamic_shapes,
                                   strict=False)


def flat_module(ep: ExportedProgram, lazy: bool = False) -> torch.fx.GraphModule:
    """The flat GraphModule of an ExportedProgram: lifted weights become ``get_attr`` nodes
    and the graph keeps the model's calling convention. ``lazy``: its Python code is
    generated on first use (torch's ``_LazyGraphModule``), not now: lowering edits the
    graph and recompiles at its end (GPT-2: ~0.1 s per code generation).

    ``ep.module()`` does the same but deep-copies the graph and every node's metadata and
    adds input guards (~0.2 s on BERT-base); here the nodes are copied with their metadata
    shared, and ``ep`` is left as it was. Programs with mutations, effect tokens or custom
    objects, or a torch without the codegen helper, take ``ep.module()``."""
    from torch.export.graph_signature import InputKind, OutputKind

    lifted = {InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR}
    signature = ep.graph_signature
    try:
        from torch.export._unlift import _get_codegen
    except ImportError:
        return ep.module()
    if (any(s.kind not in lifted and s.kind != InputKind.USER_INPUT
            for s in signature.input_specs)
            or any(s.kind != OutputKind.USER_OUTPUT for s in signature.output_specs)):
        return ep.module()
    graph = torch.fx.Graph()
    outputs, output_node = graph.graph_copy(ep.graph, {}, return_output_node=True)
    graph.output(outputs, output_node.type).meta = dict(output_node.meta)
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    attrs = {}
    for node, spec in zip(placeholders, signature.input_specs):
        if spec.kind == InputKind.USER_INPUT:
            continue
        attrs[spec.target] = (ep.state_dict[spec.target] if spec.target in ep.state_dict
                              else ep.constants[spec.target])
        with graph.inserting_after(node):  # create_node: get_attr would warn, the
            attr = graph.create_node("get_attr", spec.target)  # weight is not on gm yet
        node.replace_all_uses_with(attr)
        attr.meta = node.meta
        graph.erase_node(node)
    for node in graph.nodes:  # submodules of the program (e.g. torch.cond branches)
        if node.op in ("get_attr", "call_module") and node.target not in attrs:
            attrs[node.target] = functools.reduce(getattr, node.target.split("."),
                                                  ep.graph_module)
    call = ep.module_call_graph[0].signature
    graph._codegen = _get_codegen(ep.call_spec.in_spec, ep.call_spec.out_spec,
                                  call.forward_arg_names if call else None)
    if lazy:
        from torch.fx._lazy_graph_module import _LazyGraphModule

        return _LazyGraphModule(attrs, graph)
    return torch.fx.GraphModule(attrs, graph)
