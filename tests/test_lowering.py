"""Lowering: the decomposition registry with enabled/disabled sets, and passes that keep the
graph valid and the module's results unchanged."""

import functools

import pytest
import torch

from torch_trt_ref import CompilationSettings
from torch_trt_ref.capture import capture
from torch_trt_ref.compiler import lower_program
from torch_trt_ref.lowering.decompositions import decomposition_table, register_decomposition
from torch_trt_ref.lowering.passes import fold_constants, remove_noops, split_tied_embeddings
from torch_trt_ref.lowering.pipeline import lower_segment
from torch_trt_ref.settings import op_name

aten = torch.ops.aten


def _ops(gm) -> list[str]:
    return [op_name(n.target) for n in gm.graph.nodes if n.op == "call_function"]


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)
        self.drop = torch.nn.Dropout(0.5)

    def forward(self, x):
        return torch.nn.functional.hardswish(self.drop(self.lin(x)).detach())


def test_default_lowering_removes_dropout_and_detach_and_matches_eager():
    x = torch.randn(2, 4)
    model = Net()
    gm = lower_program(capture(model, (x,)), CompilationSettings())
    ops = _ops(gm)
    assert not any("dropout" in o or "detach" in o for o in ops)
    torch.testing.assert_close(gm(x), model.eval()(x))


def test_disabled_decomposition_keeps_the_op_and_enabled_adds_one():
    x = torch.randn(2, 4)
    kept = lower_program(capture(Net(), (x,)),
                         CompilationSettings(disabled_decompositions=[aten.hardswish]))
    assert "aten.hardswish.default" in _ops(kept)
    default = lower_program(capture(Net(), (x,)), CompilationSettings())
    assert "aten.hardswish.default" not in _ops(default)


def test_registered_decomposition_is_used_and_can_be_disabled():
    table_before = decomposition_table(CompilationSettings())
    registry: dict = {}

    @register_decomposition(aten.hardswish.default, registry=registry)
    def hardswish(x):
        return x * torch.clamp(x + 3, 0, 6) / 6

    assert registry == {aten.hardswish.default: hardswish}
    assert aten.batch_norm.default in table_before  # ours, from the default registry
    off = decomposition_table(CompilationSettings(disabled_decompositions=["aten::batch_norm"]))
    assert aten.batch_norm.default not in off
    # a kept op (KEEP) is decomposed when enabled, by torch's decomposition; the op looked
    # up afterwards is still the same object (enabling once re-created torch's packet)
    gelu = aten.gelu.default
    assert gelu not in table_before
    on = decomposition_table(CompilationSettings(enabled_decompositions=["aten.gelu"]))
    assert gelu in on and aten.gelu.default is gelu


def test_forcing_add_to_pytorch_does_not_split_linear_layers():
    """torch_executed_ops forces the user's adds, not bias or mask adds of our lowering
    (Note [Composites kept whole]): linear and sdpa stay whole."""

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.q, self.out = torch.nn.Linear(4, 8), torch.nn.Linear(8, 4)

        def forward(self, x, mask):
            q = self.q(x)
            return self.out(torch.nn.functional.scaled_dot_product_attention(q, q, q, mask))

    model, x = Block().eval(), torch.randn(2, 3, 4)
    mask = torch.randn(2, 3, 3)
    gm = lower_program(capture(model, (x, mask)), CompilationSettings())
    assert _ops(gm).count("aten.addmm.default") == 2  # the bias inside the product
    assert "aten.scaled_dot_product_attention.default" in _ops(gm)
    assert "aten.add.Tensor" not in _ops(gm)
    torch.testing.assert_close(gm(x, mask), model(x, mask))


def test_fold_constants_evaluates_weight_only_subgraphs():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.tensor([[1.0, 2.0], [3.0, 4.0]]))

        def forward(self, x):
            return x @ (self.w.t() * 2)

    x = torch.tensor([[1.0, 0.0]])
    gm = lower_program(capture(M(), (x,)), CompilationSettings())
    # only the matmul touches the input; permute/mul of the weight were folded
    assert all("permute" not in o and "mul" not in o for o in _ops(gm))
    torch.testing.assert_close(gm(x), torch.tensor([[2.0, 6.0]]))  # [1,0] @ 2*w^T
    assert fold_constants(gm, CompilationSettings()) is gm


def test_fold_constants_numbers_its_buffers_in_graph_order():
    """The folded buffers are named in the order the graph uses them, the same in every
    process (they were numbered in a set's order, which changed from run to run)."""
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.ws = torch.nn.ParameterList(torch.nn.Parameter(torch.randn(4, 4) + i)
                                             for i in range(12))

        def forward(self, x):
            for w in self.ws:
                x = x + w * 2
            return x

    gm = lower_program(capture(M(), (torch.zeros(4, 4),)), CompilationSettings())
    names = [n.target for n in gm.graph.nodes if n.op == "get_attr"]
    assert names == [f"_folded_{i}" for i in range(12)]


def test_fold_constants_folds_input_free_arithmetic_but_never_random_ops_or_a_lone_creation_op():
    """GPT-2's cache position is ``arange(0, n) + 0``: folded to one buffer. ``rand`` (and
    anything computed from it, ``dropout`` of a weight) must run each call; a lone
    ``full`` stays for its converter."""
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(4))

        def forward(self, x):
            pos = torch.arange(0, 4) + 0
            noise = torch.rand(4) + 1
            drawn = x * noise * (self.w + torch.rand_like(self.w))
            return x + pos, drawn, x + torch.full((4,), 2.0)

    x = torch.zeros(4)
    gm = lower_program(capture(M(), (x,)), CompilationSettings())
    ops = _ops(gm)
    assert "aten.arange.start_step" not in ops and "aten.arange.start" not in ops, ops
    assert ops.count("aten.rand.default") == 1 and "aten.rand_like.default" in ops, ops
    assert "aten.full.default" in ops, ops
    pos, noisy, two = gm(x)
    torch.testing.assert_close(pos, torch.tensor([0.0, 1.0, 2.0, 3.0]))
    torch.testing.assert_close(two, torch.full((4,), 2.0))
    assert not torch.equal(gm(x + 1)[1], gm(x + 1)[1])  # drawn anew on every call


def test_precision_pass_casts_weights_and_inputs_and_restores_output_dtype():
    x = torch.randn(2, 4)
    model = Net().eval()
    gm = lower_program(capture(model, (x,)), CompilationSettings(precision="fp16"))
    vals = [n.meta["val"] for n in gm.graph.nodes
            if n.op == "call_function" and isinstance(n.meta.get("val"), torch.Tensor)]
    assert torch.float16 in {v.dtype for v in vals}
    out = gm(x)
    assert out.dtype == torch.float32
    assert model.lin.weight.dtype == torch.float32  # the user's weights are untouched
    torch.testing.assert_close(out, model(x), atol=1e-2, rtol=1e-2)


def test_fold_constants_keeps_a_transposed_weight_as_a_view_of_the_parameter():
    class Transposed(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.randn(3, 4))

        def forward(self, x):
            return x @ self.weight.t()

    lin = Transposed()
    x = torch.randn(2, 4)
    gm = lower_program(capture(lin, (x,)), CompilationSettings())
    folded = [n for n in gm.graph.nodes if n.op == "get_attr" and n.target.startswith("_folded")]
    assert len(folded) == 1
    view = getattr(gm, folded[0].target)
    # no second copy: the folded permute shares the parameter's storage
    assert view.untyped_storage().data_ptr() == lin.weight.untyped_storage().data_ptr()
    assert folded[0].meta["param_name"] == "weight"
    torch.testing.assert_close(gm(x), lin(x))


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_ffts_run_in_fp32_under_reduced_precision(precision):
    """torch has no half FFT on CPU (and TensorRT no FFT): the FFT runs in fp32 and the
    real values leaving its complex result return to the target precision."""

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2 = torch.nn.Linear(8, 8), torch.nn.Linear(5, 4)

        def forward(self, x):
            spectrum = torch.fft.rfft(torch.relu(self.fc1(x)), dim=-1)
            back = torch.fft.irfft(spectrum, n=8, dim=-1)
            return self.fc2(spectrum.abs()) + back[..., :4]

    model, x = M().eval(), torch.randn(3, 8)
    settings = CompilationSettings(precision=precision)
    gm = lower_program(capture(model, (x,)), settings)
    ffts = [n for n in gm.graph.nodes if "fft" in str(n.target)]
    assert ffts and all(a.meta["val"].dtype in (torch.float32, torch.complex64)
                        for n in ffts for a in n.all_input_nodes)
    mm = [n for n in gm.graph.nodes if n.target == aten.addmm.default]
    assert all(n.meta["val"].dtype == settings.dtype for n in mm)
    torch.testing.assert_close(gm(x), model(x), atol=0.1, rtol=0.05)


@pytest.mark.parametrize("vocab, split", [(13, True), (16, False)])
def test_split_tied_embeddings_splits_unaligned_rows_and_keeps_results(vocab, split):
    """A weight read by an embedding and, transposed, by mm is split into 8 aligned rows
    plus a tail when its 13 rows are not a multiple of 8 (16 rows stay whole); every id,
    head or tail, gives eager's logits. The split is a segment pass: the lowered graph the
    partitioner sees keeps the model's one embedding (Note [Engine-only rewrites after
    partitioning])."""
    emb = torch.nn.Embedding(vocab, 4)
    head = torch.nn.Linear(4, vocab, bias=False)
    head.weight = emb.weight
    model = torch.nn.Sequential(emb, head).eval()
    ids = torch.arange(vocab).reshape(1, vocab)
    settings = CompilationSettings()
    gm = lower_program(capture(model, [ids]), settings)
    assert _ops(gm).count("aten.embedding.default") == 1 and "aten.cat.default" not in _ops(gm)
    gm = lower_segment(gm, settings)
    lookups = [n for n in gm.graph.nodes if n.target == aten.embedding.default]
    rows = sorted(n.args[0].meta["val"].shape[0] for n in lookups)
    assert rows == ([vocab - 8, 8] if split else [vocab])
    assert ("aten.cat.default" in _ops(gm)) == split
    torch.testing.assert_close(gm(ids), model(ids))
    assert split_tied_embeddings(gm, settings) is gm  # idempotent: nothing left to split
    assert [n.args[0].meta["val"].shape[0] for n in gm.graph.nodes
            if n.target == aten.embedding.default] == [n.args[0].meta["val"].shape[0]
                                                       for n in lookups]


def _writes(gm) -> list[str]:
    return [op_name(n.target) for n in gm.graph.nodes if n.op == "call_function"
            and isinstance(n.target, torch._ops.OpOverload) and n.target._schema.is_mutable]


class InPlace(torch.nn.Module):
    """torchvision's in-place style: relu_, add_ on fresh values, a value read before and
    after its write, and a mask filled through slices (swin's shifted-window mask)."""

    def forward(self, x):
        y = x * 2
        before = y + 1  # reads y before the write
        y.relu_()
        y.add_(before)
        mask = x.new_zeros((4, 4))
        mask[0:2, 1:3] = 5.0
        mask[1, :] = 7.0
        # Note [fill_ spellings]: how ``mask[...] = 5.0`` is captured depends on the torch
        # release (2.15: ``fill_.Scalar``; 2.14: ``fill_.Tensor`` of a lifted constant), so
        # both spellings are written out here, and every torch exercises both.
        mask[2, 0:3].fill_(3.0)
        mask[3, 1:].fill_(torch.tensor(2.0))
        return y + mask, before


def test_pre_dispatch_program_is_functionalized_locally_and_matches_eager():
    """capture keeps the pre-dispatch IR (in-place ops, composites); lowering rewrites the
    writes out of place and decomposes node by node, with the result of run_decompositions
    (the whole program retraced) and of eager."""
    from torch_trt_ref.capture import flat_module
    from torch_trt_ref.lowering.decompositions import decompose_locally
    from torch_trt_ref.lowering.functionalize import functionalize_inplace

    x = torch.randn(4, 4)
    ep = capture(InPlace(), (x,))
    written = set(_writes(ep.graph_module))
    assert {"aten.relu_.default", "aten.add_.Tensor", "aten.fill_.Scalar",
            "aten.fill_.Tensor"} <= written, written  # Note [fill_ spellings]
    gm = functionalize_inplace(flat_module(ep))
    assert _writes(gm) == []
    decompose_locally(gm, decomposition_table(CompilationSettings()))
    gm.recompile()
    for got, want in zip(gm(x), InPlace()(x)):
        torch.testing.assert_close(got, want)
    reference = ep.run_decompositions(decomposition_table(CompilationSettings())).module()
    lowered = lower_program(ep, CompilationSettings())
    assert lowered.meta["lowering"] == "node by node"
    for got, want in zip(lowered(x), reference(x)):
        torch.testing.assert_close(got, want)
    assert _writes(ep.graph_module)  # the captured program itself is left as it was


class WritesInput(torch.nn.Module):
    def forward(self, x):
        view = x[0]
        x.add_(1)  # an input written: seen by the caller and by ``view``
        return view * 2


def test_write_to_an_input_is_not_rewritten_locally_and_falls_back_to_the_whole_program():
    from torch_trt_ref.capture import flat_module
    from torch_trt_ref.lowering.decompositions import NotLocallyLowerable
    from torch_trt_ref.lowering.functionalize import functionalize_inplace

    x = torch.randn(3, 4)
    ep = capture(WritesInput(), (x.clone(),))
    with pytest.raises(NotLocallyLowerable, match="add_"):
        functionalize_inplace(flat_module(ep))
    gm = lower_program(ep, CompilationSettings())
    assert gm.meta["lowering"].startswith("whole program (run_decompositions), because")
    torch.testing.assert_close(gm(x.clone()), WritesInput()(x.clone()))


def test_control_flow_is_not_decomposed_locally():
    from torch_trt_ref.capture import flat_module
    from torch_trt_ref.lowering.decompositions import NotLocallyLowerable, decompose_locally

    class Cond(torch.nn.Module):
        def forward(self, x):
            return torch.cond(x.sum() > 0, lambda v: torch.nn.functional.linear(v, v),
                              lambda v: v - 1, (x,))

    ep = capture(Cond(), (torch.randn(3, 3),))
    with pytest.raises(NotLocallyLowerable, match="higher-order ops.*cond"):
        decompose_locally(flat_module(ep), decomposition_table(CompilationSettings()))


def test_a_pass_that_leaves_an_invalid_graph_is_named():
    from torch_trt_ref.lowering.pipeline import lower

    def breaks_the_graph(gm, settings):
        last = [n for n in gm.graph.nodes if n.op == "call_function"][-1]
        with gm.graph.inserting_before(next(iter(gm.graph.nodes))):  # used before defined
            gm.graph.call_function(torch.ops.aten.relu.default, (last,))
        return gm

    gm = lower_program(capture(Net(), (torch.randn(2, 4),)), CompilationSettings())
    with pytest.raises(RuntimeError, match="lowering pass breaks_the_graph left an invalid"):
        lower(gm, CompilationSettings(), passes=[breaks_the_graph])
    # the graph is linted once, after the last pass: all the passes that ran are named
    gm = lower_program(capture(Net(), (torch.randn(2, 4),)), CompilationSettings())
    with pytest.raises(RuntimeError, match="one of the lowering passes breaks_the_graph, "
                                           "remove_noops .*left an invalid"):
        lower(gm, CompilationSettings(), passes=[breaks_the_graph, remove_noops])


class MonteCarloDropout(torch.nn.Module):
    def forward(self, x):
        return torch.nn.functional.dropout(torch.relu(x) + 1, 0.5, training=True) * 2


def test_dropout_asked_for_in_training_mode_is_kept_and_runs_in_pytorch():
    """An eval model that calls dropout with training=True (Monte Carlo dropout) must still
    drop: lowering once removed it as a no-op and the compile returned no zeros at all."""
    import torch_trt_ref

    x = torch.randn(64, 64)
    compiled = torch_trt_ref.compile(MonteCarloDropout().eval(), (x,), min_block_size=1)
    assert "aten.native_dropout.default" in compiled.compile_report.support["unsupported"]
    dropped = float((compiled(x) == 0).float().mean())  # relu(x) + 1 > 0 everywhere
    assert 0.4 < dropped < 0.6  # p = 0.5 over 4096 elements: 0.5 +- 0.008 (1 sigma)


def test_default_table_and_composites_equal_torchs_own():
    """The fast collection (C++ registrations materialized once) gives torch.export's
    default table and composite set: same ops, and the same function wherever torch's is
    not a fresh per-call wrapper of a composite."""
    from torch._export.utils import _collect_all_valid_cia_ops

    from torch_trt_ref.lowering.default_table import all_cia_ops, default_table

    ours, torchs = default_table(), dict(torch.export.default_decompositions())
    assert ours.keys() == torchs.keys()
    assert all(ours[op] is torchs[op] for op in torchs if not isinstance(torchs[op],
                                                                         functools.partial))
    assert all_cia_ops() == frozenset(_collect_all_valid_cia_ops())


class Views(torch.nn.Module):
    def forward(self, x):
        a = x.view(2, 3, 4)  # x's own shape: dropped
        b = a.view(6, 4).view(24)  # a view of a view of contiguous x: reads x
        c = x.transpose(1, 2).view(2, 4, 3)  # same shape, but returned: stays
        return b * 2, c


def test_remove_noop_views_drops_same_shape_views_and_chains_and_keeps_results():
    from torch_trt_ref.lowering.views import remove_noop_views

    x = torch.randn(2, 3, 4)
    settings = CompilationSettings()
    gm = lower_program(capture(Views(), (x,)), settings)
    views = [n for n in gm.graph.nodes if n.target == aten.view.default]
    assert [tuple(n.args[1]) for n in views if n.args[0].op == "placeholder"] == [(24,)]
    assert len(views) == 2  # x.view(24) and the returned view
    for got, want in zip(gm(x), Views()(x)):
        torch.testing.assert_close(got, want)
    assert len(remove_noop_views(gm, settings).graph.nodes) == len(gm.graph.nodes)


def _every_overload() -> list:
    """Every OpOverload of every op namespace torch has loaded (made here if need be)."""
    ops = []
    for name in list(torch.ops._dir):
        namespace = getattr(torch.ops, name)
        if not isinstance(namespace, torch._ops._OpNamespace):
            continue
        for packet_name in list(namespace):
            packet = getattr(namespace, packet_name)
            if isinstance(packet, torch._ops.OpOverloadPacket):
                ops += [getattr(packet, o) for o in packet.overloads()]
    return ops


def _same_function(a, b) -> bool:
    """The same function, or torch's per-call wrapper of a composite (a partial of a fresh
    closure) made for the same op."""
    if isinstance(a, functools.partial) and isinstance(b, functools.partial):
        return (getattr(a.func, "__code__", a.func) is getattr(b.func, "__code__", b.func)
                and a.args == b.args and a.keywords == b.keywords)
    return a is b


@pytest.mark.parametrize("settings", [
    CompilationSettings(),
    CompilationSettings(disabled_decompositions=["aten::batch_norm", "aten.gelu"]),
    CompilationSettings(enabled_decompositions=["aten.gelu"]),
], ids=["default", "disabled", "enabled"])
def test_the_lookup_answers_as_the_table_on_every_op(settings):
    """Note [Lookup before the table]: DecompositionLookup works each op out alone; on
    every overload torch has (the table's keys among them) it says what the materialized
    table says, which test_default_table_and_composites_equal_torchs_own holds to
    torch.export's own."""
    from torch_trt_ref.lowering.decompositions import DecompositionLookup

    table = decomposition_table(settings)
    ops = set(_every_overload()) | set(table)
    assert len(ops) > 3000
    lookup = DecompositionLookup(settings)
    wrong = [str(op) for op in ops if (op in lookup) != (op in table)
             or op in table and not _same_function(lookup[op], table[op])]
    assert not wrong, wrong[:10]
    assert len(lookup) == len(table) and dict(lookup).keys() == table.keys()


class DeadEnds(torch.nn.Module):
    """Dead nodes of every kind eliminate_dead_code tells apart: a dead chain, a dead random
    draw (impure), unused items of a multi-output op, and dead nodes inside a cond branch."""

    def forward(self, x):
        torch.relu(x).neg()
        torch.rand(3)
        values, _ = torch.sort(x, dim=-1)
        taken = torch.cond(x.sum() > 0, lambda v: v.cos(), lambda v: v.sin(), (values,))
        return taken + 1


def test_remove_dead_nodes_removes_what_eliminate_dead_code_removes():
    """Held to torch.fx's Graph.eliminate_dead_code (Note [Dead code, users first]) on a
    captured graph with dead nodes added after export: the same nodes are left, in the
    graph and in the cond branches."""
    import copy

    from torch_trt_ref.capture import flat_module
    from torch_trt_ref.lowering.meta import remove_dead_nodes

    gm = flat_module(capture(DeadEnds(), (torch.randn(2, 4),)))
    graphs = [gm] + [m for m in gm.children() if isinstance(m, torch.fx.GraphModule)]
    assert len(graphs) == 3  # the graph and its two branches
    for g in graphs:  # export dropped the model's dead code: put some back in every graph
        for node in [n for n in g.graph.nodes if n.op == "call_function"]:
            if isinstance(node.meta.get("val"), torch.Tensor):
                with g.graph.inserting_after(node):
                    dead = g.graph.call_function(torch.ops.aten.neg.default, (node,))
                with g.graph.inserting_after(dead):
                    g.graph.call_function(torch.ops.aten.exp.default, (dead,))
                with g.graph.inserting_after(node):
                    g.graph.call_function(torch.ops.aten.rand.default, ([2],))
        g.recompile()

    def names(m):
        return [[n.name for n in g.graph.nodes] for g in
                [m] + [c for c in m.children() if isinstance(c, torch.fx.GraphModule)]]

    ours, theirs = copy.deepcopy(gm), copy.deepcopy(gm)
    assert remove_dead_nodes(ours) is True
    assert theirs.graph.eliminate_dead_code() is True
    assert names(ours) == names(theirs)
    assert names(ours) != names(gm)
    assert any("rand" in name for name in names(ours)[0])  # random draws are impure: kept
    assert remove_dead_nodes(ours) is False
