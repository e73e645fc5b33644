"""Fast paths held to the slow references they replace (STYLE: a fast path without a
differential test against its reference is a bug): our unlift of a captured program
(``capture.flat_module``) against ``ExportedProgram.module()``, and metadata propagation
with directly made weight fakes (``lowering.meta.propagate_meta``) against FakeTensorProp.
The node-by-node lowering against run_decompositions is test_lowering_routes*.py."""

from __future__ import annotations

import pytest
import torch
from torch.fx.passes.fake_tensor_prop import FakeTensorProp

from torch_trt_ref.capture import capture, flat_module
from torch_trt_ref.compiler import lower_program
from torch_trt_ref.settings import CompilationSettings
from zoo.registry import ZOO

QUICK = sorted(name for name, entry in ZOO.items() if "quick" in entry.tags)


@pytest.mark.parametrize("name", QUICK)
def test_flat_module_equals_ep_module(name):
    entry = ZOO[name]
    model = entry.factory()
    args, kwargs = entry.inputs()
    ep = capture(model, list(args), dict(kwargs))
    fast, slow = flat_module(ep), ep.module()
    ops = lambda gm: sorted(str(n.target) for n in gm.graph.nodes if n.op == "call_function")
    assert ops(fast) == ops(slow)
    with torch.no_grad():
        got, want = fast(*args, **kwargs), slow(*args, **kwargs)
    for g, w in zip(torch.utils._pytree.tree_leaves(got), torch.utils._pytree.tree_leaves(want)):
        assert torch.equal(g, w)  # the same graph on the same weights: bit-identical


@pytest.mark.parametrize("name", QUICK)
def test_propagate_meta_equals_fake_tensor_prop(name):
    entry = ZOO[name]
    args, kwargs = entry.inputs()
    ep = capture(entry.factory(), list(args), dict(kwargs))
    gm = lower_program(ep, CompilationSettings(precision="fp16"))  # ends with propagate_meta
    fast = {n.name: n.meta["val"] for n in gm.graph.nodes if n.op == "call_function"}
    fakes = [n.meta["val"] for n in gm.graph.nodes if n.op == "placeholder"]
    mode = next(f.fake_mode for f in fakes if hasattr(f, "fake_mode"))
    FakeTensorProp(gm, mode).propagate_dont_convert_inputs(*fakes)
    slow = {n.name: n.meta["val"] for n in gm.graph.nodes if n.op == "call_function"}
    describe = lambda v: [(tuple(t.shape), t.stride(), t.dtype) for t in
                          torch.utils._pytree.tree_leaves(v) if isinstance(t, torch.Tensor)]
    assert {k: describe(v) for k, v in fast.items()} == {k: describe(v) for k, v in
                                                          slow.items()}
