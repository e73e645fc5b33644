"""Reference replays with the shapes resolved before capture (Note [Shapes resolved before
capture], runtime/reference/resolved.py): held to the plain replay bit for bit, one
resolution per input signature, and no tensor made from host values or read back while a
resolved replay runs (what a CUDA graph capture forbids)."""

from __future__ import annotations

import torch
from host_values import HostValues

import torch_trt_ref
from torch_trt_ref.runtime.module import EngineModule
from torch_trt_ref.runtime.reference.layers.common import capturing
from torch_trt_ref.runtime.reference.resolved import shapes_resolved


class Heads(torch.nn.Module):
    """A linear split into heads by a reshape of the dynamic sequence length, and a
    position range added (SHAPE, CONCATENATION, GATHER, SHUFFLE and FILL layers)."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x):
        b, t, _ = x.shape
        y = self.proj(x).view(b, t, 2, 4).transpose(1, 2)
        return y.softmax(-1) + torch.arange(t, dtype=x.dtype)[:, None]


def test_resolved_replay_equals_the_plain_replay_per_signature():
    torch.manual_seed(0)
    model = Heads().eval()
    spec = torch_trt_ref.Input(min_shape=(1, 1, 8), opt_shape=(1, 4, 8), max_shape=(2, 16, 8))
    compiled = torch_trt_ref.compile(model, [spec], min_block_size=1, executor="reference",
                                     require_full_compilation=True)
    (engine,) = [m for m in compiled.modules() if isinstance(m, EngineModule)]
    for shape in [(1, 5, 8), (2, 3, 8), (1, 5, 8)]:
        x = torch.randn(shape)
        with HostValues() as plain:
            want = compiled(x)
        assert plain.seen  # the premise: the plain replay computes shapes on the host
        with shapes_resolved():
            first = compiled(x)  # a new signature: the plain run whose values it keeps
            with HostValues() as resolved:
                got = compiled(x)
        assert torch.equal(first, want) and torch.equal(got, want), shape
        assert resolved.seen == [], shape
        torch.testing.assert_close(got, model(x))
    runner = engine.handle._reference
    assert len(runner.resolved) == 2  # one per signature, the repeated one reused
    for found in runner.resolved.values():
        assert any(layer.kind == "SHAPE" for layer in found.left_out)
        assert len(found.calls) + len(found.left_out) == len(runner.prepared.fast)
    assert not capturing()  # only while a resolved replay runs
