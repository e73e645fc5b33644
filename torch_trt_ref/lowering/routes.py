"""The two decomposition routes of a captured program: node by node (the fast route) and the
whole program retraced by ``run_decompositions`` (its slow reference). The fast route must
give the reference's ops and outputs; tests/test_lowering_routes.py holds it to that."""

from __future__ import annotations

import operator
from collections import Counter
from collections.abc import Mapping

import torch
from torch.export import ExportedProgram
from torch.fx import GraphModule
from torch.utils._pytree import tree_leaves

from ..capture import flat_module
from ..capture_errors import RESIZED_VIEW, resized_view_message
from ..settings import CompilationSettings
from .decompositions import (
    MAX_ROUNDS,
    DecompositionLookup,
    NotLocallyLowerable,
    decompose_locally,
    decomposition_table,
)
from .functionalize import functionalize_inplace, writes_in_place
from .pipeline import lower


def node_by_node(ep: ExportedProgram, table: Mapping) -> GraphModule:
    """Copy the program's graph, make its in-place ops out-of-place and retrace only the
    nodes ``table`` (or a composite that cannot stay whole) covers. Raises
    NotLocallyLowerable for what it cannot handle (writes to inputs, weights or observed
    views; higher-order ops; a node that fails to trace). Not recompiled: its code is
    generated on first use (``flat_module(lazy=True)``)."""
    gm = flat_module(ep, lazy=True)
    # A decomposition may write in place (a composite's kernel calls clamp_min_), and the
    # out-of-place op may be one the table decomposes (clamp_min -> clamp): repeat while
    # the decompositions leave writes (decompose_locally itself runs until the table covers
    # no node, so a round after one that left no write would find nothing to do).
    for _ in range(MAX_ROUNDS):
        functionalize_inplace(gm)
        if not decompose_locally(gm, table) or not writes_in_place(gm):
            return gm
    raise NotLocallyLowerable(f"in-place ops still left after {MAX_ROUNDS} rounds")


def whole_program(ep: ExportedProgram, table: dict) -> GraphModule:
    """``ExportedProgram.run_decompositions``: the whole program traced again through the
    table (slower, always correct), unlifted to a flat module."""
    try:
        return ep.run_decompositions(table).module()
    except RuntimeError as err:
        if RESIZED_VIEW not in str(err):
            raise
        raise ValueError(resized_view_message(err)) from err


# Size arithmetic (sym_size, SymInt products) is traced differently by the two routes (the
# fast route traces a node's shape expressions where it meets them); tensor ops must match.
_SIZE_OPS = {"aten.sym_size.int", "aten.sym_numel.default", "aten.sym_stride.int"}


def op_histogram(gm: GraphModule) -> Counter:
    """How often each ATen op (and ``getitem``) appears, size arithmetic left out."""
    return Counter(str(n.target) for n in gm.graph.nodes if n.op == "call_function" and (
        isinstance(n.target, torch._ops.OpOverload) and str(n.target) not in _SIZE_OPS
        or n.target is operator.getitem))


def assert_routes_agree(ep: ExportedProgram, settings: CompilationSettings, args: tuple,
                        kwargs: dict, compare_values: bool = True) -> None:
    """The differential check of the fast route against its reference: the program lowered
    either way (decompositions, then the pass pipeline, as a compile does) has the same op
    histogram and gives outputs on ``args``/``kwargs`` equal within fp32 rounding. Raises
    AssertionError naming the difference, or NotLocallyLowerable when the fast route
    refuses the program (the compile then takes the reference itself). Without
    ``compare_values`` only shapes and dtypes are compared (uninitialized outputs)."""
    table = decomposition_table(settings)
    fast = lower(node_by_node(ep, DecompositionLookup(settings)), settings)
    slow = lower(whole_program(ep, table), settings)
    fast_ops, slow_ops = op_histogram(fast), op_histogram(slow)
    if fast_ops != slow_ops:
        raise AssertionError(f"op histograms differ: only node by node "
                             f"{dict(fast_ops - slow_ops)}, only run_decompositions "
                             f"{dict(slow_ops - fast_ops)}")
    got, want = _run_seeded(fast, args, kwargs), _run_seeded(slow, args, kwargs)
    if len(got) != len(want):
        raise AssertionError(f"{len(got)} outputs node by node, {len(want)} whole program")
    for i, (g, w) in enumerate(zip(got, want)):
        if isinstance(w, torch.Tensor) and not compare_values:
            if (g.shape, g.dtype) != (w.shape, w.dtype):
                raise AssertionError(f"output {i}: {g.shape} {g.dtype} node by node, "
                                     f"{w.shape} {w.dtype} whole program")
        elif isinstance(w, torch.Tensor):  # fp32 rounding: rtol 1.3e-6, atol 1e-5
            torch.testing.assert_close(g, w, equal_nan=True, msg=lambda m: f"output {i}: {m}")
        elif g != w:
            raise AssertionError(f"output {i}: {g} node by node, {w} whole program")


def _run_seeded(gm: GraphModule, args: tuple, kwargs: dict) -> list:
    """Outputs of ``gm`` with the RNG seeded alike for each route (random ops such as
    bernoulli then draw the same numbers), the caller's RNG state left as it was."""
    with torch.random.fork_rng(), torch.no_grad():
        torch.manual_seed(0)
        return tree_leaves(gm(*args, **kwargs))
