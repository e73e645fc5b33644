"""The weight program (design D11): what recomputes every engine weight and PyTorch-segment
tensor of a compiled module from a state dict (what ``refit`` runs). That the module holds
its own copies of them, never the caller's tensors, is ``ownership.py``.

Note [Weight program]: the weights a TensorRT network holds are not always the model's
parameters: lowering folds and casts them (``fold_constants``, ``cast_precision``) and
converters compute on them (batch norm's ``scale = weight / sqrt(var + eps)``). While a
compile runs those steps, ``WeightTracer`` (a ``TorchFunctionMode``) records every torch
call that takes a tensor derived from the state dict, as one straight-line program from
state-dict entries to the tensors handed to TensorRT and to the PyTorch segments. Refit
replays that program on new weights, so it computes exactly what a fresh compile would,
without capture, lowering or the builder. A Python value read from a weight (``bool``,
``item``, ``tolist``) is recorded as a guard: if new weights change it, the engine's
structure may depend on it and refit refuses with a clear error.
"""

from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Iterator

import torch
from torch._subclasses.fake_tensor import FakeTensor
from torch.overrides import TorchFunctionMode, resolve_name
from torch.utils.weak import WeakIdKeyDictionary

# Calls whose Python result depends on a tensor's values (not only its metadata).
_VALUE_READS = {"__bool__", "item", "tolist", "__float__", "__int__", "__index__",
                "__complex__", "numpy", "equal", "allclose", "__array__"}
# In-place dunders (names ending in "_" are the other in-place calls).
_WRITES = {"__setitem__", "__iadd__", "__isub__", "__imul__", "__itruediv__", "__ifloordiv__",
           "__imod__", "__ipow__", "__iand__", "__ior__", "__ixor__", "__ilshift__",
           "__irshift__"}
# Calls recorded although they return no tensor (every other such call is metadata).
_RECORDED = _VALUE_READS | {"__iter__", "__setitem__"}


class WeightProgramError(RuntimeError):
    """New weights cannot be applied by replaying the weight program."""


@dataclass(frozen=True)
class Ref:
    """A value of the weight program (an index into its value table)."""

    index: int


class _Func:
    """A recorded callable, pickled by its qualified name (OpOverloads and property getters
    do not pickle themselves)."""

    def __init__(self, fn: Callable, name: str | None = None):
        self.fn, self._name = fn, name

    @property
    def name(self) -> str | None:
        if self._name is None and getattr(self.fn, "__module__", None) != __name__:
            self._name = resolve_name(self.fn)
        return self._name

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)

    def __reduce__(self):
        if self.name is None:
            return (_Func, (self.fn,))
        return (_resolve, (self.name,))

    def __repr__(self) -> str:
        return self.name or repr(self.fn)


def _resolve(name: str) -> _Func:
    parts = name.split(".")
    obj: Any = torch if parts[0] == "torch" else torch.ops
    for part in parts[1:] if parts[0] == "torch" else parts:
        obj = getattr(obj, part)
    return _Func(obj, name)


def _tuple_of(value):
    """``iter(tensor)`` recorded as the tuple of its rows."""
    return tuple(value)


class _TorchName:
    """A ``torch`` attribute written by name: ``torch.save`` cannot write a
    ``torch.memory_format`` (``x.contiguous()`` records ``torch.contiguous_format``)."""

    def __init__(self, name: str):
        self.name = name

    def value(self) -> Any:
        return getattr(torch, self.name)


def _portable(value: Any) -> Any:
    if isinstance(value, torch.memory_format):
        return _TorchName(str(value).removeprefix("torch."))
    return value


def _restored(value: Any) -> Any:
    return value.value() if isinstance(value, _TorchName) else value


@dataclass
class Step:
    func: _Func
    args: tuple
    kwargs: dict
    outs: Any  # Ref, a list of Ref/None for a tuple result, or None for a guard
    expect: Any = None  # a guard's recorded Python result
    writes: bool = False  # writes into its first argument
    returns_arg0: bool = False  # ``__setitem__``: the result is the written tensor

    def __getstate__(self) -> dict:  # every argument torch.save can write (_TorchName)
        return {**vars(self), "args": _map(self.args, _portable),
                "kwargs": _map(self.kwargs, _portable), "expect": _portable(self.expect)}

    def __setstate__(self, state: dict) -> None:
        vars(self).update(state, args=_map(state["args"], _restored),
                          kwargs=_map(state["kwargs"], _restored),
                          expect=_restored(state["expect"]))


@dataclass
class Root:
    """A state-dict entry the program reads, with the layout it had at compile time."""

    ref: Ref
    shape: tuple[int, ...]
    dtype: torch.dtype
    stride: tuple[int, ...]
    offset: int
    storage_numel: int  # elements of its storage (views of it may reach past the tensor)

    def layout_of(self, value: torch.Tensor) -> torch.Tensor:
        """``value`` (the new weight, same shape) laid out in storage as the compiled one
        was, so the program's views and storage-wide casts read it the same way."""
        storage = value.untyped_storage().nbytes() // max(value.element_size(), 1)
        if (tuple(value.stride()), value.storage_offset(), storage) == (
                self.stride, self.offset, self.storage_numel):
            return value
        buffer = torch.zeros(self.storage_numel, dtype=self.dtype, device=value.device)
        return buffer.as_strided(self.shape, self.stride, self.offset).copy_(value)


@dataclass
class WeightProgram:
    """State dict -> every weight of a compiled module. ``outputs`` keys are
    ``("engine", segment, layer, role)`` and ``("attr", module path, attribute)``."""

    roots: dict[str, Root] = field(default_factory=dict)
    steps: list[Step] = field(default_factory=list)
    outputs: dict[tuple, Ref] = field(default_factory=dict)
    expected: dict[str, tuple[tuple[int, ...], torch.dtype]] = field(default_factory=dict)

    def run(self, state: dict[str, torch.Tensor]) -> dict[tuple, torch.Tensor]:
        """Replay the program on ``state`` (already checked by ``refit``)."""
        values: dict[int, Any] = {}
        for name, root in self.roots.items():
            value = state[name].detach()
            if value.dtype != root.dtype:
                value = value.to(root.dtype)
            values[root.ref.index] = root.layout_of(value)
        load = lambda a: values[a.index] if isinstance(a, Ref) else a  # noqa: E731
        with torch.no_grad():
            for step in self.steps:
                args, kwargs = _map(step.args, load), _map(step.kwargs, load)
                if step.writes and not isinstance(step.args[0], Ref):
                    args = (args[0].clone(), *args[1:])
                out = step.func(*args, **kwargs)
                if step.returns_arg0:
                    out = args[0]
                if step.outs is None:
                    if not _same(out, step.expect):
                        raise WeightProgramError(
                            f"the compiled structure read a weight's value ({step.func} gave "
                            f"{step.expect!r} at compile time, {out!r} now); these weights "
                            "need a fresh compile")
                elif isinstance(step.outs, Ref):
                    values[step.outs.index] = out
                else:
                    for ref, item in zip(step.outs, out):
                        if ref is not None:
                            values[ref.index] = item
        return {key: values[ref.index] for key, ref in self.outputs.items()}


    def sources(self) -> dict[tuple, list[str]]:
        """For each output, the state-dict entries it is computed from (the refit map)."""
        deps: dict[int, frozenset[str]] = {r.ref.index: frozenset([n])
                                           for n, r in self.roots.items()}
        for step in self.steps:
            used = frozenset().union(*(deps.get(r.index, frozenset())
                                       for r in _refs((step.args, step.kwargs))))
            outs = [step.outs] if isinstance(step.outs, Ref) else (step.outs or [])
            for ref in outs:
                if ref is not None:
                    deps[ref.index] = used
        return {key: sorted(deps.get(ref.index, ())) for key, ref in self.outputs.items()}


def _same(a, b) -> bool:
    try:
        import numpy as np
        if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
            return bool(np.array_equal(a, b))
        return bool(a == b)
    except Exception:  # incomparable results are a change
        return False


class WeightTracer(TorchFunctionMode):
    """Records the weight program while a compile derives weights (Note [Weight program])."""

    def __init__(self, state: dict[str, torch.Tensor] | None = None):
        super().__init__()
        self.program = WeightProgram()
        self._refs: WeakIdKeyDictionary = WeakIdKeyDictionary()
        self._root_storages: dict[int, Ref] = {}
        self._count = 0
        self.add_roots(state or {})

    def add_roots(self, state: dict[str, torch.Tensor]) -> None:
        """The state-dict entries (name -> tensor) the program starts from."""
        for name, tensor in state.items():
            self.program.expected[name] = (tuple(tensor.shape), tensor.dtype)
            if tensor in self._refs:  # a tied weight: one root, read under its first name
                continue
            ref = self._new(tensor)
            storage = tensor.untyped_storage().nbytes() // max(tensor.element_size(), 1)
            self.program.roots[name] = Root(ref, tuple(tensor.shape), tensor.dtype,
                                            tuple(tensor.stride()), tensor.storage_offset(),
                                            storage)
            if tensor.untyped_storage().nbytes():
                self._root_storages[tensor.untyped_storage().data_ptr()] = ref

    def _new(self, tensor: torch.Tensor) -> Ref:
        ref = Ref(self._count)
        self._count += 1
        self._refs[tensor] = ref
        return ref

    def ref(self, tensor: Any) -> Ref | None:
        """The program value ``tensor`` is, if it derives from the state dict. A view of a
        state-dict tensor made outside the tracer is found by its storage."""
        if not isinstance(tensor, torch.Tensor) or isinstance(tensor, FakeTensor):
            return None
        with untraced():
            ref = self._refs.get(tensor)
            if ref is not None or tensor.device.type == "meta":
                return ref
            storage = tensor.untyped_storage()
            root = self._root_storages.get(storage.data_ptr()) if storage.nbytes() else None
            if root is None:
                return None
            args = (root, tuple(tensor.shape), tuple(tensor.stride()), tensor.storage_offset())
            ref = self._new(tensor)
        self.program.steps.append(Step(_Func(torch.as_strided), args, {}, ref))
        return ref

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        writes = name in _WRITES or (name.endswith("_") and not name.endswith("__"))
        # a constant a weight is written into: the program keeps a copy from before the write
        before = (_keep(args[0], True) if writes and args and isinstance(args[0], torch.Tensor)
                  and self.ref(args[0]) is None
                  and any(self.ref(a) is not None for a in _tensors((args[1:], kwargs)))
                  else None)
        out = func(*args, **kwargs)
        if not (writes or name in _RECORDED or isinstance(out, torch.Tensor) or (
                isinstance(out, (tuple, list)) and any(isinstance(o, torch.Tensor) for o in out))):
            return out  # metadata (shape, dtype, data_ptr, ...): not a function of the values
        if not any(self.ref(a) is not None for a in _tensors((args, kwargs))):
            return out
        record = lambda a: _keep(a, False) if (ref := self.ref(a)) is None else ref  # noqa: E731
        recorded_args, recorded_kwargs = _map(tuple(args), record), _map(kwargs, record)
        if before is not None:
            recorded_args = (before, *recorded_args[1:])
        step = Step(_Func(func), recorded_args, recorded_kwargs, None, writes=writes)
        if name == "__iter__":  # recorded as the tuple of rows it yields
            out = tuple(out)
            step.func = _Func(_tuple_of)
        if name == "__setitem__":  # the written tensor is the result
            step.outs, step.returns_arg0 = self._new(args[0]), True
        elif isinstance(out, torch.Tensor):
            step.outs = self._new(out)
        elif isinstance(out, (tuple, list)) and any(isinstance(o, torch.Tensor) for o in out):
            step.outs = [self._new(o) if isinstance(o, torch.Tensor) else None for o in out]
        elif name in _VALUE_READS:
            step.expect = out
        else:  # metadata (shape, dtype, data_ptr, ...): not a function of the values
            return out
        self.program.steps.append(step)
        return iter(out) if name == "__iter__" else out

    def output(self, key: Hashable, tensor: torch.Tensor) -> bool:
        """Make ``tensor`` an output of the program under ``key``; False for a tensor that
        does not derive from the state dict (a constant, kept as compiled)."""
        ref = self.ref(tensor)
        if ref is not None:
            self.program.outputs[key] = ref
        return ref is not None

    def finish(self) -> WeightProgram:
        """The program with only the steps its outputs and guards need."""
        program = self.program
        live = {ref.index for ref in program.outputs.values()}
        kept = []
        for step in reversed(program.steps):
            outs = [step.outs] if isinstance(step.outs, Ref) else (step.outs or [])
            produces = {r.index for r in outs if r is not None}
            reads = {a.index for a in _refs((step.args, step.kwargs))}
            # a guard, a step something needs, or a write into a tensor something reads
            if step.outs is None or produces & live or (step.writes and reads & live):
                kept.append(step)
                live |= reads
        program.steps = kept[::-1]
        used = {a.index for s in program.steps for a in _refs((s.args, s.kwargs))}
        used |= {ref.index for ref in program.outputs.values()}
        program.roots = {n: r for n, r in program.roots.items() if r.ref.index in used}
        return program


def _map(value: Any, fn: Callable) -> Any:
    """``fn`` applied to every leaf of nested tuples, lists and dicts (their types kept: a
    tuple index and a list index mean different things)."""
    if type(value) in (tuple, list):
        return type(value)(_map(v, fn) for v in value)
    if type(value) is dict:
        return {k: _map(v, fn) for k, v in value.items()}
    return fn(value)


def _leaves(value: Any) -> Iterator[Any]:
    """The leaves of nested tuples, lists and dicts of call arguments."""
    if type(value) in (tuple, list):
        for item in value:
            yield from _leaves(item)
    elif type(value) is dict:
        for item in value.values():
            yield from _leaves(item)
    else:
        yield value


def _refs(value: Any) -> Iterator[Ref]:
    return (v for v in _leaves(value) if isinstance(v, Ref))


def _tensors(value: Any) -> Iterator[torch.Tensor]:
    """The tensors in nested tuples, lists and dicts of call arguments."""
    return (v for v in _leaves(value) if isinstance(v, torch.Tensor))


def _keep(value: Any, written: bool) -> Any:
    """A constant argument as the program stores it (a copy if a step writes into it)."""
    if isinstance(value, torch.Tensor):
        with torch._C.DisableTorchFunction():
            return value.detach().clone() if written else value.detach()
    return value


_TRACER: contextvars.ContextVar[WeightTracer | None] = contextvars.ContextVar(
    "torch_trt_ref_weight_tracer", default=None)


@contextlib.contextmanager
def recording(tracer: WeightTracer | None) -> Iterator[None]:
    """Make ``tracer`` the one ``traced()`` regions of this compile record into."""
    token = _TRACER.set(tracer)
    try:
        yield
    finally:
        _TRACER.reset(token)


@contextlib.contextmanager
def traced() -> Iterator[WeightTracer | None]:
    """Record the torch calls of this block into the current compile's weight program (a
    no-op outside a compile, e.g. when a pass runs on its own)."""
    tracer = _TRACER.get()
    if tracer is None:
        yield None
        return
    with tracer:
        yield tracer


def current_tracer() -> WeightTracer | None:
    return _TRACER.get()


# A block of metadata reads (dtype, shape, a storage's address: no function of the values)
# runs with torch functions off, so the tracer does not see each read (Note [Metadata reads
# skip the weight tracer], conversion/context.py).
untraced = torch._C.DisableTorchFunction
