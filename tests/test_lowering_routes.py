"""The node-by-node lowering (the fast route) held to its slow reference,
``run_decompositions``: on every zoo model, static and dynamic, the program lowered either
way (decompositions, then the pass pipeline) must have the same op histogram and outputs
equal within fp32 rounding. (The fast route once merged the q, k and v of every sdpa call
while all tests stayed green: issue 15.)"""

from __future__ import annotations

import os

import pytest
import torch

from torch_trt_ref.capture import capture
from torch_trt_ref.lowering import decomposition_table
from torch_trt_ref.lowering.routes import assert_routes_agree
from torch_trt_ref.settings import CompilationSettings
from zoo.registry import LARGER_OF, ZOO

SETTINGS = CompilationSettings()
TABLE = decomposition_table(SETTINGS)


# Every model static; dynamic variants of the quick models (all of them with
# TORCH_TRT_REF_OPINFO=full, the switch of every generated check's full set: a dynamic
# capture of a big vision model costs ~30 s on CI's 2 cores).
FULL = os.environ.get("TORCH_TRT_REF_OPINFO") == "full"


# more layers of another entry's architecture (the same ops; ~15 s each on CI's 2 cores), and
# the one vision model's dynamic capture that costs ~25 s (resnet18's covers the same ops):
# with TORCH_TRT_REF_OPINFO=full only
MORE_LAYERS_OF = {"bert_base": "bert_2layer", "gpt2": "gpt2_2layer",
                  "llama_100m": "llama_2layer", "t5_small": "t5_2layer"}
FULL_ONLY_DYNAMIC = {"mobilenet_v2"}


def _cases():
    for name, entry in sorted(ZOO.items()):
        if name in LARGER_OF or (name in MORE_LAYERS_OF and not FULL):
            continue  # a larger size of another entry's graph (zoo.registry)
        yield pytest.param(name, False, id=f"{name}-static")
        if name in FULL_ONLY_DYNAMIC and not FULL:
            continue
        if entry.dynamic is not None and (FULL or "quick" in entry.tags):
            yield pytest.param(name, True, id=f"{name}-dynamic")


@pytest.mark.parametrize("name,dynamic", list(_cases()))
def test_node_by_node_lowering_equals_run_decompositions_on_zoo_model(name, dynamic):
    entry = ZOO[name]
    model = entry.factory()
    args, kwargs = entry.inputs()
    spec_args, spec_kwargs = entry.dynamic if dynamic else (args, kwargs)
    ep = capture(model, list(spec_args), dict(spec_kwargs))
    if dynamic:
        # Nodes with SymInt arguments (arange(seq), a reshape to a symbolic size) are
        # retraced node by node too; compared at the largest declared size (the program was
        # traced at another).
        args = tuple(a.example(a.max_shape) for a in spec_args)
        kwargs = {k: v.example(v.max_shape) for k, v in spec_kwargs.items()}
    assert_routes_agree(ep, SETTINGS, args, kwargs)


class _Convolutions(torch.nn.Module):
    """conv1d/2d/3d in the forms ``lowering.direct`` rewrites (batched; stride, padding,
    dilation, groups; no bias) and those it leaves to tracing (unbatched, padding='same'),
    and eval-mode batch norm (with and without affine weights)."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Conv1d(3, 4, 3, dilation=2)
        self.b = torch.nn.Conv2d(3, 4, 3, stride=2, padding=1, bias=False)
        self.c = torch.nn.Conv2d(4, 4, 3, groups=2)
        self.d = torch.nn.Conv3d(2, 2, 1)
        self.e = torch.nn.Conv2d(3, 2, 3, padding="same")
        self.n1 = torch.nn.BatchNorm1d(4)
        self.n2 = torch.nn.BatchNorm2d(4, affine=False)
        for norm in (self.n1, self.n2):
            norm.running_mean.uniform_(-1, 1)
            norm.running_var.uniform_(0.5, 2)

    def forward(self, x1, x2, x3, unbatched):
        return (self.n1(self.a(x1)), self.n2(self.c(self.b(x2))), self.d(x3), self.e(unbatched),
                self.b(unbatched))


@pytest.mark.parametrize("dynamic", [False, True])
def test_convolutions_and_batch_norms_rewritten_directly_equal_run_decompositions(
        dynamic):
    torch.manual_seed(0)
    args = (torch.randn(2, 3, 9), torch.randn(2, 3, 8, 8), torch.randn(2, 2, 3, 4, 4),
            torch.randn(3, 8, 8))
    batch = torch.export.Dim("batch", min=1, max=8)
    shapes = ({0: batch}, {0: batch}, {0: batch}, None) if dynamic else None
    ep = torch.export.export(_Convolutions().eval(), args, dynamic_shapes=shapes)
    assert_routes_agree(ep, SETTINGS, args, {})


class _CosineEmbeddingLoss(torch.nn.Module):
    def forward(self, x, y):
        return torch.nn.functional.cosine_embedding_loss(x, y, torch.ones(x.shape[0]))


def test_a_decomposition_that_writes_in_place_gets_another_round():
    """cosine_embedding_loss decomposes into ops that write in place: the fast route must
    functionalize them and decompose again (its rounds stop only once a round leaves no
    write), and still equal run_decompositions."""
    from torch_trt_ref.lowering import routes
    from torch_trt_ref.lowering.functionalize import writes_in_place

    args = (torch.randn(4, 6), torch.randn(4, 6))
    ep = capture(_CosineEmbeddingLoss(), list(args))
    left = []
    decompose = routes.decompose_locally

    def recorded(gm, table):
        count = decompose(gm, table)
        left.append(writes_in_place(gm))
        return count

    routes.decompose_locally = recorded
    try:
        assert_routes_agree(ep, SETTINGS, args, {})
    finally:
        routes.decompose_locally = decompose
    assert left == [True, False]  # the first round left writes; the second none
