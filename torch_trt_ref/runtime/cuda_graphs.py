"""CUDA graphs for compiled programs on a GPU, as Torch-TensorRT's CUDA-graphs mode does:
each engine run on the reference executor is captured once per input signature (shapes and
dtypes) and replayed (``EngineGraphs``), and ``whole_module(compiled)`` captures a whole
compiled module, engines and PyTorch segments together.

Note [Graph replay]: a captured graph reads fixed input buffers and writes fixed output
buffers. A call copies its inputs into the graph's buffers, replays, and returns clones of
the outputs, so a caller may keep outputs across calls. The graphs of one engine (or
module) share a memory pool: their intermediates are dead once a replay's outputs are
cloned, and every replay is ordered on the current stream, so no replay can overwrite what
another still needs. The pool is made anew once its last graph is gone (a pool whose graphs
were all freed cannot take new captures: torch's allocator asserts). A
signature whose capture fails (an op that synchronizes with the host, e.g. a size read from
a tensor: a data-dependent shape) runs uncaptured from then on, with one warning. At most
the program's ``cache_size`` signatures per engine or module are kept (least recently used goes).

Off on CPU inputs. The setting is per program (Note [Graph settings]):
``set_cuda_graphs(compiled, False)`` turns capture off for one compiled or loaded module
(``cache_size=`` bounds its graphs), ``with cuda_graphs(False):`` for a block of code in this
thread; ``TORCH_TRT_REF_CUDA_GRAPHS=0`` makes off the default of programs loaded or built
from then on.

Note [Graph settings]: each engine handle holds a ``GraphSettings`` made from
``settings.default_cuda_graphs()`` when the handle is made (compile or load);
``set_cuda_graphs(compiled, ...)`` gives all engines of a program, and ``whole_module`` of
it, one shared object. Nothing process-wide is mutable. ``cuda_graphs(enabled)`` is a scoped
override for the current thread, undone on leaving the block."""

from __future__ import annotations

import contextlib
import threading
import warnings
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable, Sequence

import torch
import torch.utils._pytree as pytree

from ..settings import REPLAYS, default_cuda_graphs

_STATE = threading.local()  # outer: inside a whole-module capture; override: cuda_graphs()


@dataclass
class GraphSettings:
    """One program's CUDA-graph setting (Note [Graph settings])."""

    enabled: bool
    cache_size: int
    replay: str = "plain"  # the reference executor's replay (settings.REPLAYS)

    @classmethod
    def default(cls) -> "GraphSettings":
        return cls(**default_cuda_graphs())


def set_cuda_graphs(compiled: torch.nn.Module, enabled: bool,
                    cache_size: int | None = None, replay: str | None = None) -> GraphSettings:
    """Turn CUDA graph capture of the engines of ``compiled`` (a compiled or loaded module,
    or ``whole_module`` of one) on or off; ``cache_size``: graphs kept per engine or module
    (>= 1); ``replay``: how the reference executor replays each engine, "plain" or
    "inductor" (Note [Compiled replay] in reference/compiled_replay.py). Returns the
    program's settings, now shared by all its engines."""
    if cache_size is not None and cache_size < 1:
        raise ValueError(f"cache_size must be >= 1, got {cache_size}")
    if replay is not None and replay not in REPLAYS:
        raise ValueError(f"replay must be one of {', '.join(REPLAYS)}; got {replay!r}")
    handles = [m.handle for m in compiled.modules() if hasattr(m, "handle")]
    owners = [m for m in compiled.modules() if isinstance(m, CudaGraphModule)]
    if not handles and not owners:
        raise TypeError(f"set_cuda_graphs takes a compiled or loaded module, got "
                        f"{type(compiled).__name__} (no engines)")
    found = [x.graph_settings for x in [*owners, *handles]]
    settings = found[0]
    settings.enabled = bool(enabled)
    if cache_size is not None:
        settings.cache_size = cache_size
    if replay is not None:
        settings.replay = replay
    caches = [owner._graphs for owner in owners]
    for x in [*owners, *handles]:
        x.graph_settings = settings
        runner = getattr(x, "_reference", None)
        if runner is not None:
            caches.append(runner.graphs)
    for cache in caches:
        cache.settings = settings
        cache.trim()  # a smaller cache_size frees the graphs over it now, not at a next miss
    return settings


@contextlib.contextmanager
def cuda_graphs(enabled: bool):
    """``with cuda_graphs(False):`` runs the block without capture, ``with
    cuda_graphs(True):`` with it, whatever each program's setting; in this thread."""
    before = getattr(_STATE, "override", None)
    _STATE.override = bool(enabled)
    try:
        yield
    finally:
        _STATE.override = before


def _enabled(settings: GraphSettings) -> bool:
    override = getattr(_STATE, "override", None)
    return settings.enabled if override is None else override


def graphs_enabled(settings: GraphSettings | None = None) -> bool:
    """Whether engines of a program with ``settings`` (default: the environment's default)
    capture now: the setting or a ``cuda_graphs`` block, and not inside a whole-module
    capture."""
    return _enabled(settings or GraphSettings.default()) and not getattr(_STATE, "outer", False)


def signature(tensors: Sequence[torch.Tensor]) -> tuple:
    return tuple((tuple(t.shape), t.dtype, t.device) for t in tensors)


class _Replay:
    """One captured graph with its input and output buffers (Note [Graph replay])."""

    def __init__(self, fn: Callable, inputs: Sequence[torch.Tensor], pool=None):
        device = inputs[0].device if inputs else torch.device("cuda")
        self.static_inputs = [t.clone() for t in inputs]
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):  # warm-up: library handles, workspaces, first checks
            fn(self.static_inputs)
        torch.cuda.current_stream(device).wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph, pool=pool):
            self.static_outputs = list(fn(self.static_inputs))

    def __call__(self, inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        for buffer, value in zip(self.static_inputs, inputs):
            buffer.copy_(value)
        self.graph.replay()
        return [out.clone() for out in self.static_outputs]


class EngineGraphs:
    """Graph replay of ``fn`` (a list of tensors -> a list of tensors) per input signature,
    with a bounded cache and the uncaptured fallback (Note [Graph replay]). ``capture`` makes
    a replay from ``(fn, inputs)``: ``_Replay`` by default (tests pass their own)."""

    def __init__(self, fn: Callable, name: str, capture: Callable = _Replay,
                 settings: GraphSettings | None = None):
        self.fn, self.name, self.capture = fn, name, capture
        self.settings = settings or GraphSettings.default()
        self.replays: OrderedDict[tuple, Callable | None] = OrderedDict()
        self.warned = False
        self.pool = None  # the memory pool of this engine's graphs

    def clear(self) -> None:
        self.replays.clear()
        self.pool = None

    def trim(self) -> None:
        """Drop the least recently used graphs over ``settings.cache_size``."""
        while len(self.replays) > self.settings.cache_size:
            self.replays.popitem(last=False)

    def __call__(self, inputs: Sequence[torch.Tensor], key: tuple | None = None
                 ) -> list[torch.Tensor]:
        """``key``: the cache key (default: the inputs' signature)."""
        if torch.is_grad_enabled() and any(t.requires_grad for t in inputs):
            return self.fn(inputs)  # a graph would drop autograd history
        key = signature(inputs) if key is None else key
        replay = self.replays.get(key, False)
        if replay is False:
            replay = self._capture(inputs)
            self.replays[key] = replay
            self.trim()
        else:
            self.replays.move_to_end(key)
        return self.fn(inputs) if replay is None else replay(inputs)

    def _capture(self, inputs) -> Callable | None:
        if not any(r is not None for r in self.replays.values()):
            self.pool = None  # no live graph holds the old pool
        try:
            if self.pool is None and self.capture is _Replay:
                self.pool = torch.cuda.graph_pool_handle()
            return self.capture(self.fn, inputs, self.pool)
        except Exception as err:  # e.g. a host sync: "operation not permitted when stream
            if not self.warned:   # is capturing"; this signature runs uncaptured
                warnings.warn(f"{self.name}: CUDA graph capture failed ({type(err).__name__}: "
                              f"{str(err).splitlines()[0] if str(err) else ''}); it runs "
                              "without a graph for these input shapes", stacklevel=4)
                self.warned = True
            if torch.cuda.is_available():
                with contextlib.suppress(Exception):
                    torch.cuda.synchronize()
            return None


class CudaGraphModule(torch.nn.Module):
    """A compiled module run as one CUDA graph per input signature (``whole_module``)."""

    def __init__(self, module: torch.nn.Module, capture: Callable = _Replay):
        super().__init__()
        self.module = module
        handles = [m.handle for m in module.modules() if hasattr(m, "handle")]
        self.graph_settings = handles[0].graph_settings if handles else GraphSettings.default()
        self._graphs = EngineGraphs(self._flat, type(module).__name__, capture,
                                    self.graph_settings)
        self._specs: dict[tuple, tuple] = {}

    def forward(self, *args, **kwargs):
        leaves, in_spec = pytree.tree_flatten((args, kwargs))
        tensors = [x for x in leaves if isinstance(x, torch.Tensor)]
        others = tuple(x for x in leaves if not isinstance(x, torch.Tensor))
        if not _enabled(self.graph_settings) or not tensors or any(not t.is_cuda for t in tensors):
            return self.module(*args, **kwargs)
        try:
            key = (in_spec, others, signature(tensors))
            hash(key)
        except TypeError:  # an unhashable non-tensor argument: no graph
            return self.module(*args, **kwargs)
        self._current = (leaves, in_spec, key)
        flat = self._graphs(tensors, key)
        return pytree.tree_unflatten(flat, self._specs[key])

    def _flat(self, tensors: list[torch.Tensor]) -> list[torch.Tensor]:
        leaves, in_spec, key = self._current
        it = iter(tensors)
        leaves = [next(it) if isinstance(x, torch.Tensor) else x for x in leaves]
        args, kwargs = pytree.tree_unflatten(leaves, in_spec)
        _STATE.outer = True
        try:
            out = self.module(*args, **kwargs)
        finally:
            _STATE.outer = False
        flat, out_spec = pytree.tree_flatten(out)
        if any(not isinstance(x, torch.Tensor) for x in flat):
            raise TypeError("the module returns non-tensor values; no graph")
        self._specs[key] = out_spec
        return flat


def whole_module(compiled: torch.nn.Module, capture: Callable = _Replay) -> CudaGraphModule:
    """``compiled`` run as one CUDA graph per input signature: engines and PyTorch segments
    captured together (no launch gaps anywhere). For programs without data-dependent
    shapes; where capture fails the module runs uncaptured, with a warning."""
    return CudaGraphModule(compiled, capture)
