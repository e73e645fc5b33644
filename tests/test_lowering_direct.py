"""``lowering.direct`` against the traced route it replaces: with the direct rewrites on and
off, node-by-node lowering must give the same graph, node for node (name, op, arguments,
value shape and dtype), so reports, partition notes and converters see no difference. The
outputs against run_decompositions are test_lowering_routes.py."""

from __future__ import annotations

import pytest
import torch

from torch_trt_ref.lowering import decomposition_table, direct
from torch_trt_ref.lowering.routes import assert_routes_agree, node_by_node
from torch_trt_ref.settings import CompilationSettings

SETTINGS = CompilationSettings()


class _Block(torch.nn.Module):
    """Every form the direct rewrites take and the forms they leave to tracing: linear on
    2-D, 3-D and 4-D inputs, with and without a bias, and on a non-contiguous input;
    transpose with negative and equal dims; eval dropout; layer norm with and without
    affine weights; reshapes of contiguous, viewable and copied inputs; arange with and
    without a dtype; max and adaptive average pooling; flatten of contiguous and
    non-contiguous inputs; a no-op to; new_ones; diff with and without prepend, and of
    bools."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(8, 6)
        self.b = torch.nn.Linear(6, 8, bias=False)
        self.norm = torch.nn.LayerNorm(8)
        self.bare = torch.nn.LayerNorm([4, 8], elementwise_affine=False)
        self.drop = torch.nn.Dropout(0.1)

    def forward(self, x, flat):
        y = self.drop(self.norm(x))                      # [2, 4, 8]
        z = self.a(y)                                    # 3-D linear
        w = self.a(y.transpose(0, 1))                    # non-contiguous input: traced
        v = self.b(z.unsqueeze(0))                       # 4-D, no bias
        u = self.a(flat)                                 # 2-D linear
        t = y.transpose(-1, -2).transpose(1, 1)          # negative dims; equal dims
        r = z.reshape(-1, 24), t.reshape(-1, 32)         # contiguous; not viewable: traced
        s = y.transpose(0, 1)                            # [4, 2, 8], not contiguous
        r += s.reshape(4, -1, 8), s.reshape(4, -1, 2, 4)  # viewable: views
        a, b, c = y.split(3, dim=-1)                     # uneven: [3, 3, 2]
        m = (u > 0) & (u < 1)
        n = torch.arange(x.shape[0]) + torch.arange(3, dtype=torch.float32).sum()
        f = torch.nn.functional
        i = x.unsqueeze(0)                               # [1, 2, 4, 8]
        p = (f.max_pool2d(i, 2), f.max_pool2d(i, 3, 1, 1, ceil_mode=True),
             f.adaptive_avg_pool2d(i, 1), f.adaptive_avg_pool2d(i, (2, 2)),
             torch.flatten(i, 1), torch.flatten(i, 1, 2), torch.flatten(i, 2, 2),
             torch.flatten(i.transpose(1, 2), 1))        # the last two: traced
        ids = (u > 0).long()                             # [3, 6]
        o = (x.to(x.device), u.to(torch.float16),       # a no-op; a cast (not this op)
             ids.new_ones((), dtype=torch.bool), ids.new_ones((2, 3)),
             x.new_ones((2,)),                           # floating: traced
             torch.diff(ids, prepend=ids[:, :1] - 1), torch.diff(ids, 1, 1),
             torch.diff(ids > 0),                        # bool: traced
             self.b(z), self.b(z[0]))                    # no bias: 3-D and 2-D
        return z, w, v, u, t, self.bare(x), *r, a + b, c, m, n, *p, *o


class _Convs(torch.nn.Module):
    """The convolutions and the eval-mode batch norm: 1-, 2- and 3-D convolutions with the
    default, given and one-element int lists, groups, a conv without bias, and an unbatched
    input (traced)."""

    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv1d(4, 4, 3, padding=[1])
        self.c2 = torch.nn.Conv2d(4, 6, 3, stride=2, padding=1, groups=2, bias=False)
        self.c3 = torch.nn.Conv3d(4, 2, 1)
        self.bn = torch.nn.BatchNorm2d(6)

    def forward(self, x):                                # [n, 4, 6, 6]
        f = torch.nn.functional
        return (self.c1(x.flatten(2)), self.bn(self.c2(x)), self.c3(x.unsqueeze(2)),
                f.conv2d(x[0], self.c2.weight, groups=2, dilation=[2]))


def _inputs():
    torch.manual_seed(0)
    return torch.randn(2, 4, 8), torch.randn(3, 8)


def _graph(ep) -> list:
    gm = node_by_node(ep, decomposition_table(SETTINGS))
    out = []
    for n in gm.graph.nodes:
        val = n.meta.get("val")
        shape = (tuple(val.shape), val.dtype) if isinstance(val, torch.Tensor) else None
        out.append((n.name, n.op, str(n.target), str(n.args), str(n.kwargs), shape))
    return out


def _models():
    import transformers

    transformers.logging.set_verbosity_error()
    x = torch.randn(2, 4, 6, 6, generator=torch.Generator().manual_seed(0))
    ids = torch.randint(0, 100, (1, 16), generator=torch.Generator().manual_seed(0))
    bert = transformers.BertModel(transformers.BertConfig(
        vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64)).eval()
    gpt2 = transformers.GPT2LMHeadModel(transformers.GPT2Config(
        vocab_size=100, n_embd=32, n_layer=2, n_head=2, use_cache=False)).eval()
    return {"block": (_Block().eval(), _inputs()), "convs": (_Convs().eval(), (x,)),
            "bert": (bert, (ids,)),
            "gpt2": (gpt2, (ids,))}


@pytest.mark.parametrize("name", ["block", "convs", "bert", "gpt2"])
@pytest.mark.parametrize("dynamic", [False, True])
def test_direct_rewrites_give_the_traced_graph(name, dynamic, monkeypatch):
    model, args = _models()[name]
    shapes = None
    if dynamic:
        batch = torch.export.Dim("batch", min=2, max=32)
        rows = torch.export.Dim("rows", min=2, max=8)
        shapes = {"block": ({0: batch}, {0: rows}), "convs": ({0: batch},)}.get(
            name, ({1: batch},))
    ep = torch.export.export(model, args, dynamic_shapes=shapes)
    direct_graph = _graph(ep)
    monkeypatch.setattr(direct, "REWRITES", {})
    assert _graph(ep) == direct_graph


def test_direct_rewrites_take_the_forms_they_handle():
    ep = torch.export.export(_Block().eval(), _inputs())
    seen = []
    original = direct.REWRITES
    counting = {op: (lambda f: lambda *a: seen.append(f(*a)) or seen[-1])(fn)
                for op, fn in original.items()}
    try:
        direct.REWRITES = counting
        node_by_node(ep, decomposition_table(SETTINGS))
    finally:
        direct.REWRITES = original
    # 6 linears (5 rewritten, 1 traced: the non-contiguous input),
    # 5 transposes (4 / 1), 1 dropout, 2 layer norms, 4 reshapes (3 / 1), 1 split, 1 and,
    # 2 aranges, 2 max pools, 2 adaptive pools, 4 flattens (2 / 2), 1 no-op to,
    # 3 new_ones (2 / 1), 3 diffs (2 / 1)
    assert sorted(seen) == [False] * 7 + [True] * 30


def test_block_lowered_equals_run_decompositions():
    ep = torch.export.export(_Block().eval(), _inputs())
    assert_routes_agree(ep, SETTINGS, _inputs(), {})
