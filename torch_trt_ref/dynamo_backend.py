"""The ``torch.compile`` backend ``torch_trt_ref``: each graph dynamo captures is turned into
a module with its weights as constants, compiled by ``torch_trt_ref.compile`` (partitioned
and converted), and recorded in a report that counts recompilations."""

from __future__ import annotations

import copy
import re
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable

import sympy
import torch
from torch.fx import GraphModule, Node

from .capture import MODULE_STACK
from .compiler import compile as trt_compile
from .inputs import Input
from .settings import CompilationSettings
from .torchscript import replaying_forward

NAME = "torch_trt_ref"


@dataclass
class GraphRecord:
    """One graph dynamo handed to the backend. ``compile_id`` is dynamo's "frame/attempt"
    id: attempt > 0 means dynamo recompiled that frame (a guard failed, e.g. a new shape)."""

    compile_id: str
    recompile: bool
    inputs: list[Input]
    status: str  # "compiled" or "eager" (the backend failed and the graph runs as captured)
    reason: str = ""  # why the graph runs eagerly
    module: GraphModule | None = None  # the compiled module (compile_report, partition_result)
    out_of_range_calls: int = 0  # calls whose shapes were outside the profile: run eagerly

    @property
    def counts(self) -> dict[str, int]:
        return self.module.compile_report.counts if self.module is not None else {"torch": 1}

    def describe(self) -> str:
        specs = ", ".join(s.describe() for s in self.inputs)
        head = f"graph {self.compile_id}{' (recompile)' if self.recompile else ''}: [{specs}]"
        if self.status == "eager":
            return f"{head} ran eagerly: {self.reason}"
        c = self.counts
        return (f"{head} {c.get('tensorrt', 0)} TensorRT / {c.get('torch', 0)} PyTorch "
                "segments")


@dataclass
class BackendReport:
    """Every graph the backend compiled, in order."""

    graphs: list[GraphRecord] = field(default_factory=list)

    @property
    def recompiles(self) -> int:
        return sum(g.recompile for g in self.graphs)

    def render(self) -> str:
        lines = [f"{len(self.graphs)} graph(s), {self.recompiles} recompile(s)"]
        return "\n".join(lines + ["  " + g.describe() for g in self.graphs])


class Backend:
    """A ``torch.compile`` backend holding its settings and its own report:
    ``torch.compile(m, backend=Backend(precision="fp16"))``. Settings are validated here,
    with the same errors as ``torch_trt_ref.compile``."""

    def __init__(self, settings: CompilationSettings | None = None, **options):
        if settings is not None and options:
            raise ValueError("pass either settings=CompilationSettings(...) or keyword settings")
        self.settings = settings or CompilationSettings.from_kwargs(**options)
        self.report = BackendReport()

    def __call__(self, gm: GraphModule, example_inputs: list, **kwargs) -> Callable:
        unknown = set(kwargs) - {"options"}
        if unknown:  # torch.compile passes mode= only when it is not "default"
            raise ValueError(f"backend {NAME!r} takes options=..., not {sorted(unknown)}")
        settings = self.settings
        if kwargs.get("options"):
            settings = settings.replace(**kwargs["options"])  # unknown names: clear error
        return compile_graph(gm, example_inputs, settings, self.report)

    def reset(self) -> None:
        """Forget the recorded graphs (``torch._dynamo.reset()`` calls this)."""
        self.report.graphs.clear()


# The backend ``torch.compile(backend="torch_trt_ref")`` uses: default settings, overridden
# per torch.compile call by options=.
DEFAULT = Backend()


def torch_trt_ref_backend(gm: GraphModule, example_inputs: list, **kwargs) -> Callable:
    """The entry point of the ``torch_dynamo_backends`` group (see pyproject.toml)."""
    return DEFAULT(gm, example_inputs, **kwargs)


torch_trt_ref_backend.reset = DEFAULT.reset


def report() -> BackendReport:
    """The report of ``backend="torch_trt_ref"``: every graph compiled since the last
    ``torch._dynamo.reset()``."""
    return DEFAULT.report


def register() -> None:
    """Register the backend name in this process, for a checkout that is not installed.
    When torch already found the installed entry point (``torch_dynamo_backends`` in
    pyproject.toml), torch registers it while loading it, so this leaves the name alone."""
    from torch._dynamo.backends.registry import _BACKENDS, _COMPILER_FNS, register_backend

    if NAME not in _COMPILER_FNS and _BACKENDS.get(NAME) is None:
        register_backend(torch_trt_ref_backend, name=NAME)


def compile_graph(gm: GraphModule, example_inputs: list, settings: CompilationSettings,
                  report: BackendReport) -> Callable:
    """Compile one dynamo graph; on failure warn and return it to run as captured, unless
    ``settings.require_full_compilation``."""
    from torch._guards import CompileContext

    cid = CompileContext.current_compile_id()
    record = GraphRecord(str(cid) if cid else "?", bool(cid and cid.frame_compile_id),
                         [], "compiled")
    report.graphs.append(record)
    try:
        module, keep = as_module(gm, example_inputs, settings)
        record.inputs = input_specs(module, [example_inputs[i] for i in keep], settings)
        with outside_dynamo():
            record.module = trt_compile(module, record.inputs, settings=settings)
    except Exception as err:
        if settings.require_full_compilation:
            raise
        record.status, record.reason = "eager", f"{type(err).__name__}: {err}"
        warnings.warn(f"torch_trt_ref backend: graph {record.compile_id} runs in eager PyTorch: "
                      f"{record.reason}", stacklevel=2)
        return gm.forward
    return _runner(record, gm, keep)


@contextmanager
def outside_dynamo():
    """Run torch.export with dynamo's tracing and compile contexts of the frame being
    compiled uninstalled, so the export's guards and symbols stay its own."""
    from torch._guards import compile_context, tracing

    with tracing(None), compile_context(None):
        yield


def _runner(record: GraphRecord, gm: GraphModule, keep: list[int]) -> Callable:
    """Call the compiled module with the runtime tensors; a call whose shapes leave the
    optimization profile runs the captured graph eagerly (with one warning)."""
    compiled, specs = record.module, record.inputs

    def run(*args):
        tensors = [args[i] for i in keep]
        if all(s.contains(t.shape) for s, t in zip(specs, tensors)):
            return compiled(*tensors)
        if not record.out_of_range_calls:
            shapes = [tuple(t.shape) for t in tensors]
            warnings.warn(f"torch_trt_ref backend: graph {record.compile_id} called with shapes "
                          f"{shapes} outside its profile ({', '.join(s.describe() for s in specs)})"
                          "; running it in eager PyTorch. Raise dynamic_max_size to cover them.",
                          stacklevel=2)
        record.out_of_range_calls += 1
        return gm.forward(*args)

    return run


def _source_name(node: Node) -> str:
    arg = node.meta.get("grapharg")
    return arg.source.name if arg is not None and arg.source is not None else ""


def _is_weight(node: Node, value: Any) -> bool:
    """Parameters and buffers of modules (dynamo passes them as graph inputs when it
    inlines nn.Modules) are constants of the compiled graph, as weights are of an engine."""
    name = _source_name(node)
    return isinstance(value, torch.nn.Parameter) or "._buffers[" in name


def _is_attribute_scalar(node: Node) -> bool:
    """A Python float attribute of a module (LayerNorm.eps, Dropout.p) that dynamo passes as
    a 0-dim tensor read back with ``.item()``: an attribute (``L['self'].eps``), not a float
    argument of the frame (``L['scale']``), which stays an input."""
    arg = node.meta.get("grapharg")
    return (bool(getattr(arg, "pass_arg_as_tensor", False))
            and not re.fullmatch(r"L\['[^']*'\]", _source_name(node)))


def as_module(gm: GraphModule, example_inputs: list, settings: CompilationSettings
              ) -> tuple[GraphModule, list[int]]:
    """A copy of the dynamo graph whose inputs are only the runtime tensors: weights become
    attributes, module float attributes become constants and size inputs (SymInts) are read
    from the tensors that carry them. Returns it and the positions of the kept inputs."""
    graph = copy.deepcopy(gm.graph)
    module = GraphModule(gm, graph)
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    first = next(n for n in graph.nodes if n.op != "placeholder")
    keep, sizes = [], []
    for i, (node, value) in enumerate(zip(placeholders, example_inputs)):
        if isinstance(value, (torch.SymInt, int)):
            sizes.append(node)
        elif isinstance(value, torch.Tensor) and _is_weight(node, value):
            attr = f"_w{i}"
            if isinstance(value, torch.nn.Parameter):
                module.register_parameter(attr, value)
            else:
                module.register_buffer(attr, value)
            with graph.inserting_before(first):
                new = graph.get_attr(attr)
            new.meta = dict(node.meta)
            node.replace_all_uses_with(new)
            graph.erase_node(node)
        elif isinstance(value, torch.Tensor) and _is_attribute_scalar(node):
            _inline_scalar(graph, node, value.item())
        elif isinstance(value, torch.Tensor):
            keep.append(i)
        else:
            raise TypeError(f"graph input {node.name} is a {type(value).__name__}; the backend "
                            "takes tensors and sizes")
    for node in sizes:
        _size_from_tensor(graph, node, first)
    graph.lint()
    module.recompile()
    if settings.torch_executed_modules:  # export must see the model's submodules
        _record_module_stacks(graph)
        module.forward = replaying_forward(module)
    return module, keep


def _record_module_stacks(graph: torch.fx.Graph) -> None:
    """Copy dynamo's module chain of each node (``("L['self'].layer1.0", BasicBlock)``) to
    ``meta["custom"]`` as (path, qualified type name), where ``torch_executed_modules``
    reads it after export (``partitioning/modules.py``). Paths are made relative to the
    module the frame belongs to (``L['self']``, ``L['fn']`` or a global ``G['model']``)."""
    for node in graph.nodes:
        stack = node.meta.get("nn_module_stack")
        if node.op not in ("call_function", "call_method") or not stack:
            continue
        chain = []
        for path, kind in stack.values():
            path = re.sub(r"^[LG]\['[^']*'\]\.?", "", path)
            name = kind if isinstance(kind, str) else f"{kind.__module__}.{kind.__qualname__}"
            chain.append((path, name))
        if not chain or chain[0][0]:
            chain.insert(0, ("", ""))
        node.meta.setdefault("custom", {})[MODULE_STACK] = chain


def _inline_scalar(graph: torch.fx.Graph, node: Node, value: float) -> None:
    for user in list(node.users):
        if user.op == "call_method" and user.target == "item":
            user.replace_all_uses_with(value)
            graph.erase_node(user)
    if node.users:
        raise TypeError(f"module attribute {_source_name(node)} is used as a tensor")
    graph.erase_node(node)


def _size_from_tensor(graph: torch.fx.Graph, node: Node, first: Node) -> None:
    """Replace a SymInt input by ``tensor.size(d)`` of a tensor input with that symbol."""
    expr = node.meta["example_value"].node.expr
    for other in graph.nodes:
        val = other.meta.get("example_value")
        if other.op != "placeholder" or not isinstance(val, torch.Tensor):
            continue
        for d, size in enumerate(val.shape):
            if isinstance(size, torch.SymInt) and size.node.expr == expr:
                with graph.inserting_before(first):
                    new = graph.call_method("size", (other, d))
                new.meta = dict(node.meta)
                node.replace_all_uses_with(new)
                graph.erase_node(node)
                return
    raise TypeError(f"size input {node.name} ({expr}) is not the size of a tensor input")


def input_specs(module: GraphModule, tensors: list[torch.Tensor],
                settings: CompilationSettings) -> list[Input]:
    """An ``Input`` per runtime tensor: static dims as they are; a dim dynamo made symbolic
    gets min/max from the symbol's range (``mark_dynamic(min=, max=)`` or what dynamo
    inferred), max = ``settings.dynamic_max_size`` when the range is unbounded, and opt = the
    size of the call that triggered this compile."""
    placeholders = [n for n in module.graph.nodes if n.op == "placeholder"]
    specs = []
    for node, tensor in zip(placeholders, tensors):
        fake = node.meta.get("example_value")
        lo, hi = list(tensor.shape), list(tensor.shape)
        for d, size in enumerate(fake.shape if fake is not None else ()):
            if isinstance(size, torch.SymInt) and not isinstance(size.node.expr, sympy.Integer):
                vr = size.node.shape_env.bound_sympy(size.node.expr)
                lo[d] = max(int(vr.lower), 0) if isinstance(vr.lower, sympy.Integer) else 0
                hi[d] = (int(vr.upper) if isinstance(vr.upper, sympy.Integer)
                         else max(settings.dynamic_max_size, hi[d]))
        dtype = tensor.dtype
        if lo == hi:
            specs.append(Input(shape=tuple(tensor.shape), dtype=dtype))
        else:
            specs.append(Input(min_shape=tuple(lo), opt_shape=tuple(tensor.shape),
                               max_shape=tuple(hi), dtype=dtype))
    return specs
