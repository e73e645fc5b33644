"""The reference executor's per-engine runner: the network's layers prepared once into a
list of calls over numbered slots, the weights resident on the engine's device, and CUDA
graph replay on a GPU (``runtime/cuda_graphs.py``).

Note [Prepared replay]: ``run_snapshot`` (executor.py) states the semantics: per layer it
looks the kind up, builds the attribute dict, moves every weight to the input's device and
checks every output. ``ReferenceRunner`` does the same work once:
  - the weights are moved to the device of the inputs the first time inputs arrive on a
    device (or when ``EngineModule.to``/``.cuda()`` moves them) — in the snapshot itself, so
    one copy exists, on the engine's device — and never per call;
  - each layer becomes ``(function, input slots, attributes, output slots)``; a call is a
    loop over that list with no name lookups or dict building;
  - each layer's outputs are checked against TensorRT's inferred shapes and dtypes on the
    first call with a given input signature (shapes and dtypes), not on every call;
  - layers nothing reads are dropped, and torch's decomposed attention becomes one
    ``F.scaled_dot_product_attention`` call (Note [Attention fusion], attention_fusion.py);
  - a product read only by a sum becomes one fused call (``_fuse_multiply_add``): a folded
    batch norm's scale and shift, a matrix product and its row bias (torch's linear).
With the program's ``replay`` setting "inductor" the list of calls runs compiled (Note
[Compiled replay], compiled_replay.py); the plain replay stays its oracle. In a
``shapes_resolved()`` block the calls run with the shape values of each input signature
computed once (Note [Shapes resolved before capture], resolved.py), so a CUDA graph can
capture a dynamic-shape network.
Networks with loops or conditionals keep ``run_snapshot`` (their regions branch on values),
with the weights resident all the same."""

from __future__ import annotations

import logging
import time
from typing import Callable

import torch

from ... import observe
from ..cuda_graphs import EngineGraphs, GraphSettings, graphs_enabled, signature
from ..snapshot import LayerRecord, NetworkSnapshot
from .attention_fusion import fuse_attention
from .compiled_replay import CompiledReplay
from .executor import _check, layer_kind, run_snapshot
from .layers.math_ops import matrix_multiply
from .plan import Region, plan
from .resolved import Resolved, requested, shape_slots
from .weight_placement import StreamPlan, place

log = logging.getLogger(__name__)


def snapshot_device(snapshot: NetworkSnapshot) -> torch.device | None:
    """The device of the snapshot's weights (None for a network without weights)."""
    for layer in snapshot.layers:
        for value in layer.attrs.values():
            if isinstance(value, torch.Tensor):
                return value.device
    return None


def move_snapshot(snapshot: NetworkSnapshot, device: torch.device) -> int:
    """Move every weight of ``snapshot`` to ``device`` in place; returns the bytes moved.
    Weights that share a storage stay shared (one copy per storage)."""
    moved: dict[tuple[int, int, tuple, tuple], torch.Tensor] = {}
    nbytes = 0
    for layer in snapshot.layers:
        for key, value in layer.attrs.items():
            if isinstance(value, torch.Tensor) and value.device != device:
                ident = (value.untyped_storage().data_ptr(), value.storage_offset(),
                         tuple(value.shape), tuple(value.stride()))
                if ident not in moved:
                    moved[ident] = value.to(device)
                    nbytes += value.numel() * value.element_size()
                layer.attrs[key] = moved[ident]
    return nbytes


class _Prepared:
    """One flat network as a list of calls over slots (Note [Prepared replay])."""

    def __init__(self, snapshot: NetworkSnapshot, steps: list[LayerRecord]):
        slots: dict[str, int] = {}

        def slot(name: str | None) -> int:
            if name is None:  # an unset optional input: slot 0 holds None forever
                return 0
            return slots.setdefault(name, len(slots) + 1)

        self.inputs = tuple(slot(info.name) for info in snapshot.inputs)
        self.infos = snapshot.inputs
        self.calls: list[tuple[Callable, tuple[int, ...], dict, tuple[int, ...]]] = []
        self.layers: list[LayerRecord] = []
        for layer in steps:
            kind = layer_kind(layer)
            ins = tuple(slot(name) for name in layer.inputs)
            outs = tuple(slot(info.name) for info in layer.outputs)
            self.calls.append((kind.run, ins, layer.attrs, outs))
            self.layers.append(layer)
        self.outputs = tuple(slot(name) for name in snapshot.outputs)
        self.size = len(slots) + 1
        outs = set(self.outputs)
        calls, layers = fuse_attention(self.calls, self.layers, outs,
                                       dict(zip(self.inputs, self.infos)))
        self.fast, self.fast_layers = _fuse_multiply_add(calls, layers, outs)

    def run(self, inputs: list[torch.Tensor], check: bool,
            timed: Callable[[LayerRecord, float], None] | None = None,
            streamed: Callable[[int, dict], dict] | None = None,
            slots: list | None = None) -> list[torch.Tensor]:
        """Run the calls; ``check``: compare each output with TensorRT's inferred shape and
        dtype; ``timed``: called with each call's layer and its wall seconds (on CUDA the
        device is synchronized around each call); ``streamed``: maps call index and
        attributes to the attributes it runs with (weight streaming: weight_placement.py);
        ``slots``: a list that receives every slot's value (resolved.py)."""
        values: list = [None] * self.size
        for index, value in zip(self.inputs, inputs):
            values[index] = value
        if timed is not None or streamed is not None:
            sync = _synchronizer(inputs) if timed is not None else (lambda: None)
            for k, ((fn, ins, attrs, outs), layer) in enumerate(zip(self.fast,
                                                                   self.fast_layers)):
                sync()
                start = time.perf_counter()
                results = fn([values[i] for i in ins],
                             **(attrs if streamed is None else streamed(k, attrs)))
                sync()
                if timed is not None:
                    timed(layer, time.perf_counter() - start)
                for index, info, value in zip(outs, layer.outputs, results):
                    if check:
                        _check(layer, info, value)
                    values[index] = value
        elif check:
            for info, value in zip(self.infos, inputs):
                _check(LayerRecord("input", "INPUT", [], [info]), info, value)
            for (fn, ins, attrs, outs), layer in zip(self.fast, self.fast_layers):
                results = fn([values[i] for i in ins], **attrs)
                for index, info, value in zip(outs, layer.outputs, results):
                    _check(layer, info, value)
                    values[index] = value
        else:
            for fn, ins, attrs, outs in self.fast:
                results = fn([values[i] for i in ins], **attrs)
                for index, value in zip(outs, results):
                    values[index] = value
        if slots is not None:
            slots[:] = values
        # TensorRT writes dense, contiguous outputs; the reference executor matches that.
        return [values[index].contiguous() for index in self.outputs]


def _synchronizer(inputs: list[torch.Tensor]) -> Callable[[], None]:
    cuda = any(isinstance(t, torch.Tensor) and t.is_cuda for t in inputs)
    return torch.cuda.synchronize if cuda else (lambda: None)


def _multiply_add(inputs, **_):
    """x * s + b in one pass (``torch.addcmul``): a folded batch norm's two layers."""
    x, s, b = inputs
    return (torch.addcmul(b, x, s),)


def _row_bias(bias_shape, out_shape) -> bool:
    """Whether a tensor of ``bias_shape`` adds one row to every row of a matrix product of
    ``out_shape`` (all dims 1 but the last, which matches)."""
    return (bias_shape is not None and len(bias_shape) == len(out_shape) >= 2
            and all(d == 1 for d in bias_shape[:-1]) and bias_shape[-1] == out_shape[-1] > 0)


# Note [Bias apart under inductor]: in the inductor replay (traced by torch.compile) an
# fp32 GEMM of at most BIAS_APART_ROWS rows adds its bias after the product, not in the
# GEMM's epilogue. On CUDA, torch's fp32 addmm with a 1-D bias goes to cuBLASLt, whose
# heuristic took a split-K kernel (sgemm_largek + an epilogue kernel + memset + scal,
# 29 us) for BERT-base's 128 x 768 x 768 projections on the H200, where a plain mm took
# 17-20 us (perf-data/results/gpu/issue42/compiled_bert_base_128-fp32-b1.txt). Inductor
# unfuses such a bias itself when every reader of the GEMM is pointwise, and fuses
# mm + add back into addmm otherwise (post_grad's addmm pattern): the query, key and
# value projections feed scaled_dot_product_attention (Note [Attention fusion]), so they
# stayed on cuBLASLt. The add here reads the product through a view (unsqueeze), out of
# that pattern's reach: inductor makes it one pointwise kernel (or fuses it into a
# reader). The plain replay keeps addmm (its oracle; a separate add there is a pass
# more), and so do half-precision GEMMs and larger ones (not measured to gain).
BIAS_APART_ROWS = 512


def _bias_apart(rows: torch.Tensor) -> bool:
    """Whether ``_matmul_bias`` adds the bias apart (Note [Bias apart under inductor])."""
    return (torch.compiler.is_compiling() and rows.dtype == torch.float32
            and rows.shape[0] <= BIAS_APART_ROWS)


def _matmul_bias(inputs, op0, op1):
    """A MATRIX_MULTIPLY (plain operands, the second a weight broadcast over the batch)
    and the SUM of a row bias, as one GEMM with the bias in its epilogue (torch's linear)."""
    a, b, bias = inputs
    if op0 == "NONE" and op1 in ("NONE", "TRANSPOSE") and 2 <= b.dim() <= a.dim() and \
            all(d == 1 for d in b.shape[:-2]):
        w = b.reshape(b.shape[-2:])
        rows = a.flatten(0, -2)  # not reshape(-1, k): ambiguous for k == 0 (linear, 0 features)
        # a 1-D bias, as F.linear passes it: on CUDA torch then adds it in cuBLASLt's GEMM
        # epilogue; a (1, n) bias is first copied into every row of the output, a kernel more
        w = w.t() if op1 == "TRANSPOSE" else w
        if _bias_apart(rows):  # Note [Bias apart under inductor]
            out = (torch.mm(rows, w).unsqueeze(0) + bias.reshape(-1)).squeeze(0)
            return (out.reshape(*a.shape[:-1], out.shape[-1]),)
        out = torch.addmm(bias.reshape(-1), rows, w)
        return (out.reshape(*a.shape[:-1], out.shape[-1]),)
    (product,) = matrix_multiply([a, b], op0, op1)
    return (product + bias,)


def _fuse_multiply_add(calls, layers, outputs: set[int]) -> list:
    """``calls`` with each floating-point ELEMENTWISE PROD or MATRIX_MULTIPLY whose only
    reader is an ELEMENTWISE SUM merged into that SUM (``_multiply_add``, ``_matmul_bias``
    with a row bias): one pass over the tensor instead of two, the product no longer
    rounded on its own (within the float64 rule). Returns the calls and the layer whose
    outputs each writes (the checked first run checks those)."""
    readers: dict[int, int] = {}
    for _fn, ins, _attrs, _outs in calls:
        for i in ins:
            readers[i] = readers.get(i, 0) + 1
    producer, shapes = {}, {}
    for k, ((_fn, _ins, _attrs, outs), layer) in enumerate(zip(calls, layers)):
        for o, info in zip(outs, layer.outputs):
            producer[o], shapes[o] = k, info.shape
    fused, dropped = {}, set()
    for k, ((_fn, ins, _attrs, outs), layer) in enumerate(zip(calls, layers)):
        if layer.kind != "ELEMENTWISE" or layer.attrs.get("op") != "SUM" or len(ins) != 2:
            continue
        for j, other in ((0, 1), (1, 0)):
            p = producer.get(ins[j])
            if p is None or p in dropped or readers.get(ins[j]) != 1 or ins[j] in outputs:
                continue
            prod = layers[p]
            dtype = prod.outputs[0].dtype
            if not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
                continue
            if prod.kind == "ELEMENTWISE" and prod.attrs.get("op") == "PROD":
                fused[k] = (_multiply_add, (*calls[p][1], ins[other]), {}, outs)
            elif prod.kind == "MATRIX_MULTIPLY" and _row_bias(shapes.get(ins[other]),
                                                              prod.outputs[0].shape):
                fused[k] = (_matmul_bias, (*calls[p][1], ins[other]), calls[p][2], outs)
            else:
                continue
            dropped.add(p)
            break
    kept = [k for k in range(len(calls)) if k not in dropped]
    return [fused.get(k, calls[k]) for k in kept], [layers[k] for k in kept]


class ReferenceRunner:
    """Runs one engine's snapshot on the reference executor (Note [Prepared replay]); on
    CUDA inputs, through a CUDA graph per input signature where ``cuda_graphs`` allows."""

    def __init__(self, snapshot: NetworkSnapshot, name: str = "engine",
                 graph_settings: GraphSettings | None = None):
        self.snapshot = snapshot
        self.name = name
        self.device = snapshot_device(snapshot)
        steps = plan(snapshot.layers)
        flat = not any(isinstance(step, Region) for step in steps)
        self.prepared = _Prepared(snapshot, steps) if flat else None
        self.checked: set[tuple] = set()
        self.graphs = EngineGraphs(self._eager, name, settings=graph_settings)
        self.compiled: CompiledReplay | None = None  # made on the first "inductor" call
        self.resolved: dict[tuple, Resolved] = {}  # per signature (resolved.py)
        self.streaming: StreamPlan | None = None  # weight streaming (weight_placement.py)

    def set_weight_budget(self, budget: int | None) -> None:
        """Keep at most ``budget`` bytes of this engine's weights on its device and stream
        the rest per layer (``None``: all resident). A no-op when unchanged."""
        if self.prepared is None or budget == (self.streaming and self.streaming.budget):
            return
        self.streaming = None if budget is None else StreamPlan(self, budget)
        if budget is None:
            place(self, frozenset())

    def to(self, device: torch.device) -> None:
        """Move the weights to ``device`` (once; a no-op where they are)."""
        device = torch.device(device)
        if self.device is not None and self.device != device:
            nbytes = move_snapshot(self.snapshot, device)
            log.info("engine %s: %d weight bytes moved to %s", self.name, nbytes, device)
            if self.streaming is not None:  # the streamed weights go back to the host
                self.device = device
                self.streaming = StreamPlan(self, self.streaming.budget)
            self.graphs.clear()
            self.compiled = None
            self.resolved.clear()
        self.device = device

    def __call__(self, named: dict[str, torch.Tensor]) -> list[torch.Tensor]:
        inputs = [named[info.name] for info in self.snapshot.inputs]
        device = inputs[0].device if inputs else self.device
        if device is not None and device != self.device:
            self.to(device)
        observer = observe.current()
        timing = observer is not None and observer.times_layers and self.prepared is not None
        if timing or self.streaming is not None:
            def timed(layer: LayerRecord, seconds: float) -> None:
                observer.layer_timed(self.name, layer.name, layer.kind, seconds)
            streamed = None if self.streaming is None else self.streaming.attrs_for
            outputs = self.prepared.run(inputs, True, timed if timing else None, streamed)
            return [o.contiguous() for o in outputs]  # eager, never a CUDA graph
        if device is not None and device.type == "cuda" and graphs_enabled(self.graphs.settings):
            # one graph per signature and replay: a program can switch replays and keep both
            return self.graphs(inputs, (signature(inputs), self.graphs.settings.replay))
        return self._eager(inputs)

    def _eager(self, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        if self.prepared is None:
            named = {info.name: value for info, value in zip(self.snapshot.inputs, inputs)}
            return [o.contiguous() for o in run_snapshot(self.snapshot, named)]
        key = tuple((tuple(t.shape), t.dtype) for t in inputs)
        if requested():  # Note [Shapes resolved before capture]
            return self._resolved(inputs, key)
        compiled = self.graphs.settings.replay == "inductor"
        if compiled and self.compiled is None:
            self.compiled = CompiledReplay(self.prepared, self.name)
        if key not in self.checked:  # Note [Compiled replay]: checked plain, then compiled
            outputs = self.prepared.run(inputs, True)
            self.checked.add(key)
            if compiled:
                self.compiled.prepare(inputs, key)
            return outputs
        if compiled:
            self.compiled.prepare(inputs, key)  # a no-op once made for ``key``
            outputs = self.compiled(inputs, key)
            if outputs is not None:
                return outputs
        return self.prepared.run(inputs, False)

    def _resolved(self, inputs: list[torch.Tensor], key: tuple) -> list[torch.Tensor]:
        """The resolved replay of ``key`` (resolved.py); at a new signature, a plain run
        (checked at its first) whose values it keeps."""
        found = self.resolved.get(key)
        if found is not None:
            return found.run(inputs)
        values: list = []
        outputs = self.prepared.run(inputs, key not in self.checked, slots=values)
        self.checked.add(key)
        shapes, constants = shape_slots(self.prepared)
        self.resolved[key] = Resolved(self.prepared, shapes, values, constants)
        return outputs
