"""The ``torch_trt_ref::execute_engine`` custom op: the one path by which an engine runs, in
eager mode, inside ``torch.export`` programs and after ``torch.export.load``.

Note [How the engine reaches the op]: the engine is an ``EngineHandle``, registered with
``torch._library.opaque_object.register_custom_class`` as a *symbolic* opaque type: the op
takes it as an argument, ``torch.export`` lifts the handle of every ``EngineModule`` into
the program as a ``CUSTOM_OBJ`` input (as it does a torchbind ``torch.classes`` object, which
would need C++), ``torch.export.save`` writes it into the ``.pt2`` archive with pickle
(``EngineHandle.__reduce__``: plan bytes, network snapshot, specs) and ``torch.export.load``
unpickles it. No registry of engines keyed by id, no engine bytes as a tensor buffer held
next to the weights: the handle is the engine. (A *constant* opaque type, baked into the
graph instead of lifted, does not round-trip: torch 2.15's ``.pt2`` writer only stores the
program's ``constants``, not objects inlined in nodes.)

The fake implementation computes outputs from ``OutputRule``s (runtime/output_rules.py),
so an exported program keeps symbolic shapes through engines.
"""

from __future__ import annotations

import logging
import warnings
from typing import Sequence

import torch

from .._trt import BACKEND, trt
from .cuda_graphs import GraphSettings
from .engine import Engine
from .opaque import HAS_OPAQUE_HANDLES, CustomClassBase, register_handle_class

# OutputRule: programs saved before the rules moved to output_rules.py name it here
from .output_rules import OutputRule  # noqa: F401
from .reference.replay import ReferenceRunner, snapshot_device
from .reference.weight_placement import streamable_bytes
from .trt_executor import TensorRTExecutor, tensorrt_unavailable_reason

log = logging.getLogger(__name__)


# -- the handle --------------------------------------------------------------------------
class EngineHandle(CustomClassBase):
    """What ``execute_engine`` runs: an engine, the executor that runs it ("tensorrt" or
    "reference"), the segment name (for messages) and the output rules."""

    def __init__(self, engine: Engine, executor: str, name: str, rules: list[OutputRule]):
        self.engine = engine
        self.executor = executor
        self.name = name
        self.rules = rules
        self._trt = None  # the deserialized engine, made on the first TensorRT run
        self._reference = None  # the reference executor's prepared plan (replay.py)
        self.graph_settings = GraphSettings.default()  # Note [Graph settings]
        self.weight_budget: int | None = None  # weight streaming (runtime/streaming.py)
        self.profile: int | str = "auto"  # optimization profile: runtime.profiles
        self.last_profile: int | None = None  # the profile of the latest call

    def __repr__(self) -> str:
        return f"EngineHandle({self.name}, executor={self.executor})"

    def device(self) -> torch.device | None:
        """Where the engine's weights (its network snapshot's) are."""
        if self._reference is not None:
            return self._reference.device
        return snapshot_device(self.engine.snapshot)

    def to(self, device: torch.device) -> None:
        """Move the engine's weights to ``device`` once (``EngineModule.to``)."""
        if self._reference is None:
            self._reference = ReferenceRunner(self.engine.snapshot, self.name,
                                              self.graph_settings)
        self._reference.to(device)

    def set_weight_budget(self, budget: int | None) -> None:
        """Bytes of this engine's weights the reference executor keeps on the device (the
        rest streamed per layer); ``None``: all of them."""
        self.weight_budget = budget
        if self._reference is not None:
            self._reference.set_weight_budget(budget)

    def streamable_bytes(self) -> int:
        """Bytes of engine weights the reference executor reads: what weight streaming
        divides between the device and the host."""
        if self._reference is None:
            self._reference = ReferenceRunner(self.engine.snapshot, self.name,
                                              self.graph_settings)
        prepared = self._reference.prepared
        return (self.engine.snapshot.weight_bytes() if prepared is None
                else streamable_bytes(prepared))

    @property
    def streaming(self):
        """The reference executor's weight-streaming plan, if weights stream."""
        return None if self._reference is None else self._reference.streaming

    def run(self, args: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        engine = self.engine
        if len(args) != len(engine.inputs):
            raise ValueError(f"{self.name}: the engine takes {len(engine.inputs)} inputs "
                             f"({[s.name for s in engine.inputs]}), got {len(args)}")
        self.last_profile = engine.choose_profile([tuple(a.shape) for a in args],
                                                  self.profile, self.name)
        named = {spec.name: value.to(spec.dtype) if value.dtype != spec.dtype else value
                 for spec, value in zip(engine.inputs, args)}
        if self.executor == "tensorrt":
            if self._trt is None:
                self._trt = TensorRTExecutor(engine.runnable_plan(),
                                             engine.requires_output_allocator)
            outputs = self._trt(named, self.last_profile)
        else:
            if self._reference is None:
                self._reference = ReferenceRunner(engine.snapshot, self.name,
                                                  self.graph_settings)
            budget = getattr(self, "weight_budget", None)  # (handles saved before it: None)
            if budget is not None or self._reference.streaming is not None:
                self._reference.set_weight_budget(budget)
            outputs = self._reference(named)
        self._check(outputs)
        aliased = self._in_place(outputs, named)
        return _unaliased(outputs, args, aliased)

    def _in_place(self, outputs, named: dict[str, torch.Tensor]) -> set[int]:
        """Indices of the outputs that are inputs written in place (``Engine.aliases``); an
        executor that did not write the caller's tensor itself is an error, not a copy."""
        aliases, found = self.engine.aliases, set()
        for k, name in enumerate(self.engine.output_names):
            if name in aliases:
                source = named[aliases[name]]
                if outputs[k].data_ptr() != source.data_ptr():
                    raise RuntimeError(
                        f"{self.name}: output {name} must share the memory of input "
                        f"{aliases[name]} (an in-place KV-cache update), but the executor "
                        "returned another tensor; pass the cache in the engine's dtype, "
                        "contiguous, on the engine's device")
                found.add(k)
        return found

    def _check(self, outputs) -> None:
        """Outputs have the dtype, rank and static dims the fake implementation promises.
        Dynamic dims are not compared: they are torch's symbolic shapes, which can be off
        where torch reasons size-obliviously at the edge of a range (``x[-n + 1:]`` is
        n - 1 rows symbolically but 1 row at n = 1, as eager and the engine compute it),
        exactly as in a torch.export of the model itself."""
        for k, (rule, out) in enumerate(zip(self.rules, outputs)):
            if out.dtype != rule.dtype or len(rule.dims) != out.dim() or any(
                    isinstance(w, int) and w != g for w, g in zip(rule.dims, out.shape)):
                raise RuntimeError(
                    f"{self.name}: output {k} is {out.dtype}{list(out.shape)}, the engine's "
                    f"output rule says {rule.dtype}{list(rule.dims)}")

    def fake(self, args: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        ctx = torch.library.get_ctx()
        sizes: dict[str, torch.SymInt] = {}

        def fresh(name: str):
            if name not in sizes:
                sizes[name] = ctx.new_dynamic_size()
            return sizes[name]

        device = args[0].device if args else torch.device("cpu")
        return [torch.empty(rule.shape(args, fresh), dtype=rule.dtype, device=device)
                for rule in self.rules]

    # Pickling (torch.save, pickle, torch.export.save) carries the engine itself: the plan
    # bytes (PlanFile.__reduce__), snapshot and specs, and the TensorRT that built it.
    def __reduce__(self):
        return (_restore_handle, (self.engine, self.executor, self.name, self.rules,
                                  BACKEND, trt.__version__))


def _restore_handle(engine: Engine, executor: str, name: str, rules: list[OutputRule],
                    backend: str, version: str) -> EngineHandle:
    return EngineHandle(engine, runnable_executor(executor, name, engine, (backend, version)),
                        name, rules)


def runnable_executor(executor: str, name: str, engine: Engine,
                      built_by: tuple[str, str]) -> str:
    """The executor a loaded engine runs on: its own, unless its plan is unusable here
    (built by another TensorRT, which cannot deserialize it, or "tensorrt" without a
    supported GPU): then the reference executor replays the network snapshot, with a
    warning. An engine neither can run is a RuntimeError."""
    here = (BACKEND, trt.__version__)
    if tuple(built_by) != here:
        why = (f"its plan was built by {' '.join(built_by)} and {' '.join(here)} cannot "
               "deserialize it")
    elif executor == "tensorrt":
        why = tensorrt_unavailable_reason()
        if why is None:
            return executor
        why = f"TensorRT cannot run here ({why})"
    else:
        return executor
    missing = engine.snapshot.unsupported_kinds()
    if missing:
        raise RuntimeError(f"engine {name} cannot run here: {why}, and the reference executor "
                           f"has no function for its layer kinds {missing}; compile the model "
                           "again on this machine")
    warnings.warn(f"engine {name}: {why}; it runs on the reference executor (its network "
                  "snapshot) instead", stacklevel=3)
    return "reference"


def _unaliased(outputs: list[torch.Tensor], args: Sequence[torch.Tensor],
               in_place: set[int] = frozenset()) -> list[torch.Tensor]:
    """A custom op's outputs may not alias its inputs or each other (a snapshot that passes
    an input through would): such outputs are copied. Aliasing is judged as torch's check
    does (``torch._library.utils.check_aliasing_constraint``): by storage object, empty
    tensors included. Outputs in ``in_place`` (inputs the engine writes, Engine.aliases)
    are returned as they are: the caller's own tensors, updated."""
    seen = {t.untyped_storage()._cdata for t in args}
    out = []
    for k, tensor in enumerate(outputs):
        if k in in_place:
            out.append(tensor)
            continue
        if tensor.untyped_storage()._cdata in seen:
            tensor = tensor.clone()
        seen.add(tensor.untyped_storage()._cdata)
        out.append(tensor)
    return out


if HAS_OPAQUE_HANDLES:  # torch >= 2.14: engines inside torch.export programs (opaque.py)
    register_handle_class(EngineHandle)

    @torch.library.custom_op("torch_trt_ref::execute_engine", mutates_args=())
    def execute_engine(inputs: list[torch.Tensor], engine: EngineHandle) -> list[torch.Tensor]:
        """Run ``engine`` on ``inputs`` (the segment's inputs, in order)."""
        return engine.run(inputs)

    @execute_engine.register_fake
    def _execute_engine_fake(inputs, engine):
        return EngineHandle.fake(engine, inputs)
