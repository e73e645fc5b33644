"""The decomposition registry (seed 001): our own decompositions plus torch's built-in
ones, adjustable through ``enabled_decompositions`` / ``disabled_decompositions``."""

from __future__ import annotations

import functools
import operator
from collections.abc import Mapping
from contextlib import ExitStack, contextmanager
from typing import Callable

import torch
from torch._decomp import get_decompositions

from ..settings import CompilationSettings, matches_op
from .default_table import all_cia_ops, default_entry, default_table
from .direct import rewrite_directly
from .meta import remove_dead_nodes

aten = torch.ops.aten

DECOMPOSITIONS: dict[torch._ops.OpOverload, Callable] = {}


def register_decomposition(*ops, registry: dict | None = None):
    """Register ``fn`` as the decomposition of each op (overloads or packets)."""

    def wrap(fn):
        for op in ops:
            overloads = [getattr(op, o) for o in op.overloads()] \
                if isinstance(op, torch._ops.OpOverloadPacket) else [op]
            for overload in overloads:
                (DECOMPOSITIONS if registry is None else registry)[overload] = fn
        return fn

    return wrap


# Ops we keep whole although torch would decompose them: a converter exists and the
# decomposition would be slower or less precise in TensorRT.
# Note [Composites kept whole]: a linear layer's bias and an attention's mask stay inside
# the op a converter builds whole, as in Torch-TensorRT: linear becomes addmm (its bias in
# the matrix product; 3-D inputs are flattened around it) and scaled_dot_product_attention
# is kept. Decomposed into mm + add.Tensor and matmul/softmax + add.Tensor, they gave
# torch_executed_ops={"aten.add.Tensor"} nodes the user never wrote, cutting every
# projection and attention of a transformer in two (BERT-base, min_block_size 5: 37
# TensorRT segments, Torch-TensorRT 25): forcing an op to PyTorch forces the user's op,
# not an artifact of our lowering. (linear is not kept as one node: min_block_size counts
# nodes, and a feed-forward block of five nodes would fall to PyTorch.)
KEEP = {aten.native_layer_norm.default, aten.gelu.default,
        aten.scaled_dot_product_attention.default,
        # one IResizeLayer instead of index arithmetic and gathers
        aten.upsample_nearest1d.vec, aten.upsample_nearest3d.vec,
        aten._upsample_nearest_exact1d.vec, aten._upsample_nearest_exact2d.vec,
        aten._upsample_nearest_exact3d.vec, aten.upsample_linear1d.vec,
        aten.upsample_trilinear3d.vec, aten.upsample_bicubic2d.vec,
        # one ISliceLayer (REFLECT / CLAMP / WRAP sample mode) instead of index gathers
        aten.reflection_pad1d.default, aten.reflection_pad2d.default,
        aten.reflection_pad3d.default, aten.replication_pad1d.default,
        aten.replication_pad2d.default, aten.replication_pad3d.default,
        aten._pad_circular.default, aten.roll.default,
        aten.upsample_nearest2d.default, aten.native_channel_shuffle.default}


def decomposition_table(settings: CompilationSettings) -> dict:
    """torch's default (core ATen) table, minus ``KEEP`` and ``disabled_decompositions``,
    plus ``enabled_decompositions`` from torch's full table, plus ours. Materializing
    torch's table costs ~0.1 s, so tables are cached (a fresh dict is returned: callers
    may edit it)."""
    return dict(_table(*_key(settings)))


def _key(settings: CompilationSettings) -> tuple:
    return (settings.enabled_decompositions, settings.disabled_decompositions,
            frozenset(DECOMPOSITIONS.items()))


class DecompositionLookup(Mapping):
    """``decomposition_table(settings)`` answered one op at a time (Note [Lookup before
    the table]): ``op in lookup`` and ``lookup.get(op)`` give what the table gives;
    iterating it, or ``table()``, materializes the table."""

    def __init__(self, settings: CompilationSettings):
        self._key = _key(settings)
        self._ours = dict(self._key[2])
        self._ops: dict = {}

    def __getitem__(self, op):
        if op not in self._ops:
            self._ops[op] = _entry(op, *self._key[:2], self._ours)
        if self._ops[op] is None:
            raise KeyError(op)
        return self._ops[op]

    def __contains__(self, op) -> bool:
        return isinstance(op, torch._ops.OpOverload) and self.get(op) is not None

    def table(self) -> dict:
        return dict(_table(*self._key))

    def __iter__(self):
        return iter(self.table())

    def __len__(self) -> int:
        return len(_table(*self._key))


# Note [Lookup before the table]: materializing the table means finding every composite
# op of every namespace (``all_cia_ops``: ~0.02 s in a fresh process, each compile of the
# CLI or a sweep is one). Lowering node by node only asks about the ops in the graph, so it
# asks a DecompositionLookup, and the table is made only when a node is traced with
# make_fx (which takes the whole table) or the whole program is retraced. BERT-base and
# resnet18 now lower with no trace at all. tests/test_lowering.py holds the lookup to the
# table on every op torch has made.
def _entry(op, enabled: frozenset, disabled: frozenset, ours: dict):
    """``_table(enabled, disabled, ours).get(op)``, worked out for ``op`` alone. It repeats
    ``_table``'s rules one op at a time on purpose: the table is the reference the test
    holds the lookup to."""
    entry = default_entry(op, _core())
    if entry is not None and (op in KEEP or matches_op(op, disabled)):
        entry = None
    if enabled:
        entry = _enabled(enabled).get(op, entry)
    mine = ours.get(op)
    if mine is not None and not matches_op(op, disabled) and (
            op not in KEEP or matches_op(op, enabled)):
        entry = mine
    return entry


@functools.lru_cache(maxsize=1)
def _core() -> dict:
    from torch._decomp import _core_aten_decompositions_post_autograd

    return _core_aten_decompositions_post_autograd()


@functools.lru_cache(maxsize=16)
def _enabled(enabled: frozenset) -> dict:
    # getattr, not __getattr__: calling the namespace's __getattr__ directly makes a
    # new OpOverloadPacket and replaces torch's, so every OpOverload looked up later
    # (keys of this table, torch's own tables) is a different object.
    return get_decompositions([getattr(getattr(torch.ops, n.split(".")[0]), n.split(".")[1])
                               for n in enabled])


@functools.lru_cache(maxsize=16)
def _table(enabled: frozenset, disabled: frozenset, ours: frozenset) -> dict:
    table = default_table()  # dict(torch.export.default_decompositions()), faster
    for op in list(table):
        if op in KEEP or matches_op(op, disabled):
            del table[op]
    if enabled:
        table.update(_enabled(enabled))
    for op, fn in ours:
        if not matches_op(op, disabled) and (op not in KEEP or matches_op(op, enabled)):
            table[op] = fn
    return table


@register_decomposition(aten.linear.default)
def linear(x, weight, bias=None):
    """x @ weight^T, the bias inside addmm (Note [Composites kept whole]). Without a bias,
    matmul of the transposed weight (split_tied_embeddings reads that form)."""
    if bias is None or x.dim() < 2:
        out = torch.matmul(x, weight.t())
        return out if bias is None else out + bias
    if x.dim() == 2:
        return aten.addmm.default(bias, x, weight.t())
    # flatten, not reshape(-1, k): with k == 0 features, -1 is ambiguous and raised
    out = aten.addmm.default(bias, x.flatten(0, -2), weight.t())
    return out.view(*x.shape[:-1], weight.shape[0])


class NotLocallyLowerable(Exception):
    """A program ``decompose_locally`` (or ``functionalize_inplace``) cannot lower node by
    node; the caller retraces it whole with ``run_decompositions``."""


@register_decomposition(aten.batch_norm.default)
def batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps,
               cudnn_enabled):
    """Eval-mode batch norm as the one op functionalization would make of it (and the
    normalization converter takes); torch's own decomposition goes through
    ``native_batch_norm``. Training mode keeps that route."""
    if training or running_mean is None or running_var is None:
        return aten.native_batch_norm.default(input, weight, bias, running_mean, running_var,
                                              training, momentum, eps)[0]
    return aten._native_batch_norm_legit_no_training.default(
        input, weight, bias, running_mean, running_var, momentum, eps)[0]


def _preservable_composites() -> frozenset:
    """Composite (CompositeImplicitAutograd) ops torch.export can keep whole (not the
    view-like ones such as ``reshape``); collected once, as torch is imported."""
    return all_cia_ops()


@contextmanager
def preserve_composites(table: dict):
    """While active, composite ops that ``table`` does not decompose stay whole when traced,
    as ``run_decompositions`` keeps them. Uses torch's private export helpers; raises
    ImportError where they do not exist."""
    from torch.export.exported_program import (
        _override_composite_implicit_decomp,
        _special_op_to_preserve_cia,
    )

    keep = {op: _special_op_to_preserve_cia for op in _preservable_composites()
            if op not in table}
    with _override_composite_implicit_decomp(keep):
        yield


# Bookkeeping ops torch's table lists but that must stay as they are.
NEVER_DECOMPOSE = {aten.sym_size.int, aten.sym_stride.int, aten.sym_numel.default}


def _needs_decomposition(op, table: dict) -> bool:
    """In ``table``, or a composite op that cannot stay whole (``reshape``, ``contiguous``:
    run_decompositions always decomposes these)."""
    if not isinstance(op, torch._ops.OpOverload) or op in NEVER_DECOMPOSE:
        return False
    if op._schema.is_mutable:  # functionalized first (fill_ -> fill), as run_decompositions
        return False
    if op in table:
        return True
    return (torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "CompositeImplicitAutograd")
            and not _is_preservable(op))


@functools.lru_cache(maxsize=None)
def _is_preservable(op) -> bool:
    """``op in _preservable_composites()`` for an op with a C++ composite kernel, without
    collecting every composite (``all_cia_ops`` makes its candidates the same way)."""
    from torch._export.utils import _is_preservable_cia_op

    return _is_preservable_cia_op(op)


def decompose_locally(gm: torch.fx.GraphModule, table: dict) -> int:
    """Replace each node whose op needs decomposing by its decomposition, traced on the
    node's fake inputs (seed 001: decompositions shape-propagate through FakeTensor).

    Only the nodes that need it are retraced, instead of the whole program; the graph is
    edited in place and not recompiled (``lower`` recompiles once at its end). Returns the
    number of nodes decomposed. Raises NotLocallyLowerable for higher-order ops (their
    subgraphs would need lowering too) or a node that cannot be traced; callers then use
    ``ExportedProgram.run_decompositions``."""
    try:
        with ExitStack() as stack:
            return _decompose_nodes(gm, table, _Tracing(table, stack))
    except ImportError as err:
        raise NotLocallyLowerable(f"torch lacks a private export helper: {err}") from err


class _Tracing:
    """What tracing a node with make_fx takes, made at the first trace (Note [Lookup before
    the table]): the whole table and composites preserved while tracing."""

    def __init__(self, table: Mapping, stack: ExitStack):
        self._source, self._stack, self._table = table, stack, None

    def table(self) -> dict:
        if self._table is None:
            source = self._source
            full = source.table() if isinstance(source, DecompositionLookup) else source
            # In-place ops stay out of the table: a decomposition that writes in place (a
            # composite's ``fill_``) keeps the write, which ``functionalize_inplace`` turns
            # into the functional op (``fill``) before that is decomposed (``full_like``),
            # the order in which run_decompositions functionalizes and decomposes.
            self._table = {op: fn for op, fn in full.items() if not op._schema.is_mutable}
            self._stack.enter_context(preserve_composites(self._table))
        return self._table


def _decompose_nodes(gm: torch.fx.GraphModule, table: Mapping, tracing: _Tracing) -> int:
    fake_mode = next((n.meta["val"].fake_mode for n in gm.graph.nodes if n.op == "placeholder"
                      and hasattr(n.meta.get("val"), "fake_mode")), None)
    if fake_mode is None:
        raise NotLocallyLowerable("no FakeTensor metadata on the inputs")
    hops = {str(n.target) for n in gm.graph.nodes if n.op == "call_function"
            and isinstance(n.target, torch._ops.HigherOrderOperator)}
    if hops:
        raise NotLocallyLowerable(f"higher-order ops {sorted(hops)} (control flow, no_grad or "
                                  "autocast regions: their subgraphs need lowering too)")
    traced: dict = {}  # repeated layers decompose identical nodes: trace each once
    total = 0
    # A decomposition may emit ops the table decomposes further (a composite's C++ kernel
    # calls clamp_min, which the table turns into clamp): repeat until none is left, as
    # run_decompositions leaves none.
    for _ in range(MAX_ROUNDS):
        nodes = [n for n in gm.graph.nodes
                 if n.op == "call_function" and _needs_decomposition(n.target, table)]
        if not nodes:
            break
        for node in nodes:
            # lowering.direct rewrites as the stock decompositions do (torch's; ours)
            ours = DECOMPOSITIONS.get(node.target)
            if (ours is None or table.get(node.target) is ours) and rewrite_directly(
                    gm, node, traced):
                continue
            try:
                _decompose_node(gm, node, tracing, fake_mode, traced)
            except NotLocallyLowerable:
                raise
            except Exception as err:
                raise NotLocallyLowerable(f"{node.name} ({node.target}): {err}") from err
        total += len(nodes)
    else:
        raise NotLocallyLowerable(f"decompositions still left ops to decompose after "
                                  f"{MAX_ROUNDS} rounds")
    remove_dead_nodes(gm)  # the export's own dead nodes too (unused getitems)
    return total


# Rounds of decomposing (here) and of functionalizing then decomposing (routes.node_by_node)
# before the node-by-node route gives up (run_decompositions then lowers the program). A
# round is needed per link of a chain a decomposition leaves (fill_ -> fill -> full_like);
# every quick-zoo model needs at most 2. 8 rather than 4: a bound above
# the need changes no result, and the smaller one could send a program with a longer chain
# to the slow route.
MAX_ROUNDS = 8


def _signature(node: torch.fx.Node, inputs: list, position: dict):
    """A key under which ``node``'s decomposition can be reused: the op, its non-tensor
    arguments and its inputs' shapes, strides and dtypes. Symbolic sizes enter as their
    expressions: two nodes whose inputs have the same expressions have equal sizes at run
    time, and the traced decomposition reads sizes from its inputs (``sym_size``), never
    as constants. A SymInt input enters as its expression."""
    metas = []
    for n in inputs:
        val = n.meta["val"]
        if isinstance(val, torch.SymInt):
            metas.append(("SymInt", str(val)))
        else:
            metas.append((tuple(map(str, val.shape)), tuple(map(str, val.stride())),
                          val.dtype, val.device))
    args = torch.fx.node.map_arg((node.args, node.kwargs), lambda n: ("input", position[n]))
    return node.target, repr(args), tuple(metas)


def _decompose_node(gm: torch.fx.GraphModule, node: torch.fx.Node, tracing: _Tracing,
                    fake_mode, traced: dict) -> None:
    from torch._dispatch.python import enable_python_dispatcher
    from torch.fx.experimental.proxy_tensor import make_fx

    inputs = node.all_input_nodes
    if any(not isinstance(n.meta.get("val"), (torch.Tensor, torch.SymInt)) for n in inputs):
        raise NotLocallyLowerable(f"{node.name}: inputs other than tensors and SymInts")
    position = {n: i for i, n in enumerate(inputs)}
    key = _signature(node, inputs, position)
    if key in traced:
        _inline(gm, node, traced[key], inputs, fake_mode)
        return
    # make_fx tracks tensors by identity: two inputs with one FakeTensor would be traced as
    # one placeholder, and the decomposition would read the wrong input (the sdpa bug: q,
    # k, v from three copies of one traced transpose, which share their values). A repeated
    # value is traced as a fresh one. (SymInt inputs of one expression are equal at run
    # time, so either may be read.)
    values, seen = [], set()
    for n in inputs:
        value = n.meta["val"]
        if isinstance(value, torch.Tensor) and id(value) in seen:
            value = _fresh(value, fake_mode)
        seen.add(id(value))
        values.append(value)

    # The table's function itself: calling a composite op would run torch's own
    # decomposition of it (linear -> addmm) instead of the table's (linear -> mm + add).
    table = tracing.table()
    decomposition = table.get(node.target, node.target)

    def call(*values):
        args = torch.fx.node.map_arg(node.args, lambda n: values[position[n]])
        kwargs = torch.fx.node.map_arg(node.kwargs, lambda n: values[position[n]])
        return decomposition(*args, **kwargs)

    # The Python dispatcher, as run_decompositions uses: composites then take their
    # Python decompositions (margin_ranking_loss -> clamp) instead of their C++ kernels
    # (-> clamp_min), so both routes give the same ops.
    with fake_mode, enable_python_dispatcher():
        sub = make_fx(call, decomposition_table=table, tracing_mode="real")(*values)
    traced[key] = sub
    _inline(gm, node, sub, inputs, fake_mode)


def _fresh(val, fake_mode):
    """A new FakeTensor (or structure of them) like ``val``, so no two nodes share one."""
    if isinstance(val, torch.Tensor):
        with fake_mode:
            return torch.empty_strided(val.shape, val.stride(), dtype=val.dtype,
                                       device=val.device)
    if isinstance(val, (tuple, list)):
        return type(val)(_fresh(v, fake_mode) for v in val)
    return val


def _inline(gm: torch.fx.GraphModule, node: torch.fx.Node, sub: torch.fx.GraphModule,
            inputs: list, fake_mode) -> None:
    """Copy ``sub``'s nodes in place of ``node``. A traced decomposition is inlined once
    per node of the same signature, and its copies share its FakeTensor values (making
    fresh ones for every copy cost ~0.3 s of a GPT-2 lowering); ``_decompose_node`` traces
    a repeated input value as a fresh one."""
    env: dict = {}
    placeholders = iter(inputs)
    with gm.graph.inserting_before(node):
        for n in sub.graph.nodes:
            if n.op == "placeholder":
                env[n] = next(placeholders)
            elif n.op == "output":
                result = torch.fx.node.map_arg(n.args[0], lambda m: env[m])
            elif n.op == "get_attr":
                value = getattr(sub, n.target)
                name = f"_decomp_const_{len(list(gm.buffers()))}_{n.target}"
                gm.register_buffer(name, value)
                env[n] = gm.graph.get_attr(name)
                env[n].meta = dict(n.meta)
            else:
                env[n] = gm.graph.node_copy(n, lambda m: env[m])
                env[n].meta = {**node.meta, **n.meta}
    _replace_uses(gm, node, _unwrap_tuple_maker(gm, result))
    gm.graph.erase_node(node)


def _replace_uses(gm: torch.fx.GraphModule, node: torch.fx.Node, result) -> None:
    """Point ``node``'s users at ``result``; for a tuple or list result (nested, as in
    ``(hist, [edges...])``) each ``getitem`` user takes its item."""
    if not isinstance(result, (tuple, list)):
        node.replace_all_uses_with(result)
        return
    for user in list(node.users):
        if user.op == "call_function" and user.target is operator.getitem:
            _replace_uses(gm, user, result[user.args[1]])
            gm.graph.erase_node(user)
    if node.users:
        raise NotLocallyLowerable(f"{node.name}: tuple output used directly")


def _unwrap_tuple_maker(gm: torch.fx.GraphModule, result):
    """A decomposition returning a named tuple (``std_mean`` -> ``return_types.std_mean``)
    is traced as a call of the tuple's constructor, a node no converter takes; its items
    are the constructor's arguments."""
    if (isinstance(result, torch.fx.Node) and result.op == "call_function"
            and isinstance(result.target, type) and issubclass(result.target, tuple)
            and not result.kwargs):
        items = tuple(result.args[0]) if len(result.args) == 1 else result.args
        if not result.users:
            gm.graph.erase_node(result)
        return items
    return result
