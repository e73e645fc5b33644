"""``compile``: capture -> lowering -> partitioning -> conversion -> build -> stitching."""

from __future__ import annotations

import functools
import gc
import logging
import operator
import sys
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Sequence

import torch
from torch.export import ExportedProgram
from torch.fx import GraphModule

from . import observe, size_cover, torchscript
from .arguments import (
    as_model,
    check_signature,
    input_names,
    keyword_inputs,
    positional_inputs,
    train_mode_warning,
)
from .build import build_engine
from .capture import (
    as_inputs,
    capture,
    example_args,
)
from .conversion import converters  # noqa: F401  (registers the built-in converters)
from .conversion.interpreter import Interpreter
from .conversion.registry import CONVERTERS, ConverterRegistry
from .conversion.shapes import spec_from_fake
from .engine_cache import EngineCache
from .inputs import Input
from .lowering import lower_program  # noqa: F401  (public here too: tests, docs, the zoo)
from .lowering.pipeline import lower_segment
from .ownership import own_weights, storages_of
from .partitioning import (
    TENSORRT,
    TORCH,
    PartitionResult,
    check_nodes,
    partition,
    stitch,
    support_report,
)
from .partitioning.hierarchical import wrap_backend_segment
from .partitioning.plan import plan_summary
from .partitioning.random_ops import fixed_draws_warning, is_random
from .partitioning.stitch import segment_name
from .partitioning.upcast import upcast_missing_kernels
from .ranges import profile_symbol_ranges, symbol_ranges, traced_ranges
from .report import CompileReport, EngineRecord
from .runtime.guard import InputDtypeGuard, SharedDimsGuard
from .runtime.module import EngineModule, choose_executor
from .runtime.opaque import require_opaque_handles
from .settings import CompilationSettings, settings_json
from .size_conditions import size_conditions
from .weights import WeightTracer, current_tracer, recording, traced

log = logging.getLogger(__name__)


class SegmentCompilationError(RuntimeError):
    """A TensorRT segment could not be converted or built while full compilation was
    required."""


@dataclass
class CompileJob:
    """One compile's state, passed to the steps after capture instead of long parameter
    lists: the (captured) model and its example inputs with their specs, the settings and
    converter registry, the report being filled, the device and executor, and, once the
    graph is partitioned, the symbol ranges and the engine cache."""

    model: Any
    inputs: Sequence[Any]
    kwarg_inputs: dict[str, Any]
    specs: list[Input]
    settings: CompilationSettings
    registry: ConverterRegistry
    report: CompileReport
    device: torch.device
    executor: str
    ranges: dict[Any, Any] = field(default_factory=dict)
    profile_ranges: tuple = ()  # symbol ranges per optimization profile (several only)
    cache: EngineCache | None = None


def compile(model: torch.nn.Module | ExportedProgram, inputs: Sequence[Any] = (),
            kwarg_inputs: dict[str, Any] | None = None, *,
            settings: CompilationSettings | None = None,
            registry: ConverterRegistry = CONVERTERS, **kwargs) -> GraphModule:
    """Compile ``model`` for example ``inputs`` (tensors or ``Input`` specs).

    Returns a ``torch.fx.GraphModule`` that takes the same inputs and returns the same
    output structure as ``model``; TensorRT segments are ``EngineModule`` submodules.
    ``settings`` or keyword settings (see ``CompilationSettings``) control the compile;
    ``result.compile_report`` says what happened.

    ``inputs`` is a tuple or list (a single tensor or Input counts as a 1-tuple); ``model``
    an nn.Module, an ExportedProgram or a plain function of tensors. A model in train mode
    is compiled with eval semantics (a warning says so; the model keeps its mode). The
    result raises TypeError for an input of another dtype than it was compiled for.
    With ``dryrun=True`` nothing is converted or built: every segment runs in PyTorch and
    ``compile_report`` is the plan (``compile_report.render()``; docs/partitioning.md)."""
    if settings is not None and kwargs:
        raise ValueError("pass either settings=CompilationSettings(...) or keyword settings")
    if settings is not None and not isinstance(settings, CompilationSettings):
        raise TypeError(f"settings: got a {type(settings).__name__}; pass "
                        "settings=torch_trt_ref.CompilationSettings(...), or the settings as "
                        "keyword arguments of compile (compile(model, inputs, **settings) for "
                        "a dict)")
    require_opaque_handles("compiling")
    settings = settings or CompilationSettings.from_kwargs(**kwargs)
    model = as_model(model)
    inputs, kwarg_inputs = positional_inputs(inputs), keyword_inputs(kwarg_inputs)
    check_signature(model, inputs, kwarg_inputs)
    training = train_mode_warning(model)
    if training:
        warnings.warn(training, stacklevel=2)
    # split by size where the trace does not cover a declared range (size_cover)
    compile_traced = functools.partial(_compile_traced, settings=settings, registry=registry)
    return size_cover.compile_covering(compile_traced, model, inputs, kwarg_inputs)


def _compile_traced(model, inputs, kwarg_inputs, settings: CompilationSettings,
                    registry: ConverterRegistry,
                    captured: ExportedProgram | None = None) -> GraphModule:
    with _existing_objects_frozen(), recording(WeightTracer()):
        return _compile(model, inputs, kwarg_inputs, settings, registry, captured)


@contextmanager
def _existing_objects_frozen():
    """Keep the garbage collector's full collections off the objects that existed before
    the compile (the model, torch, transformers): with them in the heap a full collection
    takes ~0.5 s and a BERT-base compile triggers several. Objects made during the compile
    are collected as usual; afterwards everything is as before (``gc.unfreeze``). A caller
    who froze objects itself is left alone."""
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _compile(model, inputs, kwarg_inputs, settings: CompilationSettings,
             registry: ConverterRegistry,
             captured: ExportedProgram | None = None) -> GraphModule:
    """Capture, lower, partition, convert and build. ``captured``: the program a previous
    attempt captured (and found not to cover the declared ranges: size_cover), used as is."""
    report = CompileReport(settings=settings_json(settings))
    observer = observe.current()
    if observer is not None:
        observer.compile_started()
    kwarg_inputs = kwarg_inputs or {}
    specs = as_inputs(list(inputs)) + as_inputs(list(kwarg_inputs.values()))
    device = next((v.device for v in list(inputs) + list(kwarg_inputs.values())
                   if isinstance(v, torch.Tensor)), torch.device("cpu"))
    executor = choose_executor(settings.executor, device)

    say = _progress(settings)
    with report.phase("capture"):
        if torchscript.is_torchscript(model):  # a ScriptModule becomes an FX GraphModule
            report.frontend = torchscript.ROUTE
            if captured is None:
                model = torchscript.to_graph_module(model, example_args(inputs), kwarg_inputs)
        if captured is not None:
            ep = captured
        else:
            ep = capture(model, list(inputs), dict(kwarg_inputs), settings.record_stack_traces)
            if not isinstance(model, ExportedProgram):  # Note [Sizes the trace does not cover]
                covered, conditions = traced_ranges(ep, specs), size_conditions(ep, specs)
                if covered or conditions:
                    raise size_cover.Uncovered(covered, ep, conditions)
    job = CompileJob(model, inputs, kwarg_inputs, specs, settings, registry, report, device,
                     executor)
    say(f"captured in {report.phases['capture']:.2f}s")
    current_tracer().add_roots(ep.state_dict)  # refit's inputs (torch_trt_ref.weights)
    with report.phase("lowering"):
        gm = lower_program(ep, settings)
    report.lowering = gm.meta.get("lowering", "")
    report.autocast = gm.meta.get("autocast", [])
    say(f"lowered in {report.phases['lowering']:.2f}s")
    with report.phase("partition"):
        checked = check_nodes(gm, settings, registry)
        report.support = support_report(gm, settings, registry, checked).to_json()
        result = partition(gm, settings, registry, checked=checked)
        report.partition = result.to_json()
        stitched = stitch(gm, result)
    say(str(result))
    if settings.dryrun:
        return _dry_run(job, stitched, gm, result)
    job.ranges = symbol_ranges(gm, specs)
    job.profile_ranges = profile_symbol_ranges(gm, specs)
    job.cache = (EngineCache(settings.engine_cache_path, settings.engine_cache_size)
                 if settings.cache_engines else None)
    n_trt = result.count(TENSORRT)
    fixed_draws: list = []  # random nodes in engines (Note [Random ops in an engine])
    for i, seg in enumerate(result.segments):
        name = segment_name(i, seg)
        if seg.target not in (TENSORRT, TORCH):  # another backend of "hierarchical"
            setattr(stitched, name, wrap_backend_segment(name, getattr(stitched, name),
                                                         seg.target))
        if seg.target == TORCH:
            _upcast(job, name, getattr(stitched, name))
        if seg.target != TENSORRT:
            continue
        say(f"converting and building {name} ({len(report.engines) + len(report.fallbacks) + 1}"
            f"/{n_trt}, {seg.compute_size()} ops)")
        submodule = getattr(stitched, name)
        engine = _compile_segment(job, name, submodule)
        if engine is None:
            _upcast(job, name, submodule)
            continue
        setattr(stitched, name, EngineModule(engine, executor, name, submodule))
        if observer is not None:
            observer.engine_built(name, engine)
        fixed_draws += [n for n in seg.nodes if is_random(n)]
        report.engines.append(EngineRecord(
            name, engine.layer_count, engine.nbytes, engine.snapshot.weight_bytes(),
            engine.build_seconds, executor, [s.to_json() for s in engine.inputs],
            dict(engine.converters_used), engine.cache_hit, engine.cache_refit,
            engine.plan_current, engine.aliases, engine.profile_count))
    if fixed_draws:
        warnings.warn(fixed_draws_warning(fixed_draws), stacklevel=4)
    stitched.compile_report = report
    stitched.partition_result = result
    with report.phase("weights"):
        _hold_weights(stitched, ep)
    _guard_input_dtypes(stitched, job)
    return stitched


def _dry_run(job: CompileJob, stitched: GraphModule, gm: GraphModule,
             result: PartitionResult) -> GraphModule:
    """``dryrun=True``: the plan without conversion or build. Every segment stays a
    PyTorch GraphModule (TensorRT segments too, so the module runs and equals eager), and
    ``compile_report`` carries the plan (``partitioning.plan.plan_summary``)."""
    report = job.report
    report.dryrun = True
    report.plan = plan_summary(gm, result, job.settings)
    for i, seg in enumerate(result.segments):
        _upcast(job, segment_name(i, seg), getattr(stitched, segment_name(i, seg)))
    stitched.compile_report = report
    stitched.partition_result = result
    _guard_input_dtypes(stitched, job)
    return stitched


def _guard_input_dtypes(stitched: GraphModule, job: CompileJob) -> None:
    """Install ``InputDtypeGuard`` on the compiled module: an input of another dtype than
    the example it was compiled for is a TypeError, not a silent cast; and
    ``SharedDimsGuard`` where inputs declare ``shared_dims``: tied axes of unequal sizes
    are a ValueError."""
    model, inputs, kwarg_inputs, specs = job.model, job.inputs, job.kwarg_inputs, job.specs
    positional = [(n, spec.dtype) for n, spec in zip(input_names(model, len(inputs)), specs)]
    keyword = {k: spec.dtype for k, spec in zip(kwarg_inputs, specs[len(inputs):])}
    stitched.register_forward_pre_hook(InputDtypeGuard(positional, keyword), with_kwargs=True)
    names = [n for n, _ in positional] + list(keyword)
    ties: dict[str, list] = {}
    for i, (name, spec) in enumerate(zip(names, specs)):
        for dim, tag in spec.shared_dims:
            ties.setdefault(tag, []).append((name, i if i < len(inputs) else None, dim))
    if ties:
        stitched.register_forward_pre_hook(SharedDimsGuard(ties), with_kwargs=True)


def _hold_weights(stitched: GraphModule, ep: ExportedProgram) -> None:
    """The module holds its own weights, as an engine does (design D11): whatever still
    shares storage with the caller's parameters, buffers or constants is copied. Its
    ``weight_program`` recomputes every engine weight (registered by ``_compile_segment``)
    and PyTorch-segment tensor from a state dict, for ``refit``."""
    tracer = current_tracer()
    for path, sub in stitched.named_modules():
        if isinstance(sub, GraphModule):
            for node in sub.graph.find_nodes(op="get_attr"):
                tracer.output(("attr", path, node.target), operator.attrgetter(node.target)(sub))
    stitched.weight_program = tracer.finish()
    engines = {name: m.engine for name, m in stitched.named_modules()
               if isinstance(m, EngineModule)}
    for key, params in stitched.weight_program.sources().items():
        if key[0] == "engine":  # every parameter a layer's weights derive from
            for param in params:
                layers = engines[key[1]].refit_map.setdefault(param, [])
                if key[2] not in layers:
                    layers.append(key[2])
    own_weights(stitched, storages_of([*ep.state_dict.values(), *ep.constants.values()]),
                [m.engine.snapshot for m in stitched.modules() if isinstance(m, EngineModule)])


def _upcast(job: CompileJob, name: str, segment: GraphModule) -> None:
    """In a half-precision compile, a PyTorch segment's nodes whose ops have no fp16/bf16
    kernel on the device run in float32 (``upcast_missing_kernels``); the report says so."""
    if job.settings.precision != "fp32":
        lines = upcast_missing_kernels(segment, job.device)
        if lines:
            job.report.upcasts[name] = lines


def _progress(settings: CompilationSettings):
    """A printer for progress lines on stderr when settings.progress is set."""
    def say(message: str) -> None:
        if settings.progress:
            print(f"[torch_trt_ref] {message}", file=sys.stderr, flush=True)

    return say


def _compile_segment(job: CompileJob, name: str, submodule: GraphModule):
    """Convert and build one segment; on failure warn and keep it in PyTorch unless full
    compilation was required. The weight tracer learns which layer weights derive from the
    model: refit recomputes them, the engine cache key leaves their values out."""
    ranges, settings, registry, report = job.ranges, job.settings, job.registry, job.report
    executor, cache = job.executor, job.cache
    placeholders = [n for n in submodule.graph.nodes if n.op == "placeholder"]
    tracer = current_tracer()
    try:
        with report.phase("lowering"):  # Note [Engine-only rewrites after partitioning]
            lower_segment(submodule, settings)
        specs = [spec_from_fake(n.name, n.meta["val"], ranges, job.profile_ranges)
                 for n in placeholders]
        with report.phase("conversion"), traced():
            network = Interpreter(submodule, specs, settings, registry).run()
        model_weights = {(layer, role): tensor
                         for layer, roles in network.ctx.weight_sources.items()
                         for role, tensor in roles.items()
                         if tracer is not None and tracer.ref(tensor) is not None}
        with report.phase("engine"):  # the builder call inside is phase "build"
            engine = build_engine(network, settings, cache, set(model_weights),
                                  phase=report.phase)
        missing = engine.snapshot.unsupported_kinds()
        if missing and executor == "reference":
            raise RuntimeError(f"reference executor has no function for layer kinds {missing}")
        for (layer, role), tensor in model_weights.items():
            tracer.output(("engine", name, layer, role), tensor)
        return engine
    except Exception as err:  # one failed segment falls back to PyTorch
        if settings.require_full_compilation:
            raise SegmentCompilationError(f"{name}: {type(err).__name__}: {err}") from err
        report.fallbacks[name] = f"{type(err).__name__}: {err}"
        warnings.warn(f"{name} runs in PyTorch: TensorRT compilation failed "
                      f"({type(err).__name__}: {err})", stacklevel=3)
        return None


def executors_used(module: GraphModule) -> dict[str, str]:
    """Which executor each engine of a compiled module uses."""
    return {name: m.executor for name, m in module.named_modules() if isinstance(m, EngineModule)}


__all__ = ["compile", "executors_used", "Input", "CompilationSettings"]
