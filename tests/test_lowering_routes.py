"""The node-by-node lowering (the fast route) held to its slow reference,
``run_decompositions``: on every zoo model, static and dynamic, the two routes must give the
same op histogram and outputs equal within fp32 rounding. (The fast route once merged the
q, k and v of every sdpa call while all tests stayed green: issue 15.)"""

from __future__ import annotations

import operator
from collections import Counter

import pytest
import torch

from torch_trt_ref.capture import capture
from torch_trt_ref.lowering import decomposition_table
from torch_trt_ref.lowering.decompositions import NotLocallyLowerable
from torch_trt_ref.lowering.routes import node_by_node, whole_program
from torch_trt_ref.settings import CompilationSettings
from zoo.registry import ZOO

TABLE = decomposition_table(CompilationSettings())

# Size arithmetic (sym_size, SymInt products) is traced differently by the two routes (the
# fast route traces a node's shape expressions where it meets them); the tensor ops must
# be the same.
SIZE_OPS = {torch.ops.aten.sym_size.int, torch.ops.aten.sym_numel.default,
            torch.ops.aten.sym_stride.int}


def histogram(gm: torch.fx.GraphModule) -> Counter:
    return Counter(str(n.target) for n in gm.graph.nodes if n.op == "call_function"
                   and n.target not in SIZE_OPS and isinstance(n.target, torch._ops.OpOverload)
                   or n.target is operator.getitem)


def check_routes(ep, args, kwargs) -> None:
    fast = node_by_node(ep, TABLE)
    fast.recompile()
    slow = whole_program(ep, TABLE)
    fast_ops, slow_ops = histogram(fast), histogram(slow)
    assert fast_ops == slow_ops, (
        f"op histograms differ: only node by node {dict(fast_ops - slow_ops)}, only "
        f"run_decompositions {dict(slow_ops - fast_ops)}")
    with torch.no_grad():
        got, want = fast(*args, **kwargs), slow(*args, **kwargs)
    got, want = torch.utils._pytree.tree_leaves(got), torch.utils._pytree.tree_leaves(want)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w)  # fp32 rounding: rtol 1.3e-6, atol 1e-5


def _cases():
    for name, entry in sorted(ZOO.items()):
        yield pytest.param(name, False, id=f"{name}-static")
        if entry.dynamic is not None:
            yield pytest.param(name, True, id=f"{name}-dynamic")


@pytest.mark.parametrize("name,dynamic", list(_cases()))
def test_node_by_node_lowering_equals_run_decompositions_on_zoo_model(name, dynamic):
    entry = ZOO[name]
    model = entry.factory()
    args, kwargs = entry.inputs()
    spec_args, spec_kwargs = entry.dynamic if dynamic else (args, kwargs)
    ep = capture(model, list(spec_args), dict(spec_kwargs))
    if dynamic:
        # The fast route retraces no node with SymInt arguments (arange(seq), reshape to a
        # symbolic size): such programs take run_decompositions, and only then.
        try:
            node_by_node(ep, TABLE)
        except NotLocallyLowerable as err:
            assert "non-tensor inputs" in str(err), err
            return  # run at a size other than the traced one
        args = tuple(a.example() for a in spec_args)
        kwargs = {k: v.example() for k, v in spec_kwargs.items()}
    check_routes(ep, args, kwargs)
