"""The prepared replay's attention fusion (runtime/reference/attention_fusion.py, issue 27):
torch's decomposed scaled-dot-product attention runs as one ``F.scaled_dot_product_attention``
call, and its outputs equal the slow route (``run_snapshot``, every layer as recorded) by the
float64 rule, on bert_2layer and on attention with a run-time mask that masks whole rows;
a softmax written out by hand and a pattern whose scores are also a network output replay
layer by layer; layers nothing reads are dropped, assertions kept."""

from __future__ import annotations

import copy
import dataclasses
import warnings

import pytest
import torch
import torch.nn.functional as F

import torch_trt_ref
from torch_trt_ref.accuracy import judge, to_float64
from torch_trt_ref.runtime.module import EngineModule
from torch_trt_ref.runtime.reference.attention_fusion import drop_unread
from torch_trt_ref.runtime.reference.executor import run_snapshot
from torch_trt_ref.runtime.reference.replay import ReferenceRunner
from zoo.registry import get


def runners(compiled) -> list[ReferenceRunner]:
    """A fresh reference runner (prepared plan) for every engine, installed in ``compiled``."""
    found = []
    for m in compiled.modules():
        if isinstance(m, EngineModule):
            m.handle._reference = ReferenceRunner(m.engine.snapshot, m.handle.name)
            found.append(m.handle._reference)
    return found


def fused_calls(runner: ReferenceRunner) -> list[dict]:
    return [attrs for fn, _ins, attrs, _outs in runner.prepared.fast
            if fn.__name__ == "scaled_dot_product_attention"]


def fused_and_slow(compiled, *args, **kwargs):
    """The compiled module's outputs through the prepared (fused) plans, then through
    ``run_snapshot`` (each runner without its plan)."""
    with torch.no_grad():
        fused = compiled(*args, **kwargs)
        for runner in runners(compiled):
            runner.prepared = None
        slow = compiled(*args, **kwargs)
    return fused, slow


@pytest.fixture(scope="module")
def bert():
    entry = get("bert_2layer")
    model = entry.factory()
    args, kwargs = entry.inputs()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled = torch_trt_ref.compile(model, args, kwargs, executor="reference")
    return model, args, kwargs, compiled


def test_bert_attention_is_one_sdpa_call_per_layer_and_equals_the_slow_route(bert):
    model, args, kwargs, compiled = bert
    calls = [attrs for runner in runners(compiled) for attrs in fused_calls(runner)]
    assert len(calls) == 2  # one per layer
    # BERT without an attention mask: the constant mask is all zeros and is left out
    assert all(c == {"scale": 0.125, "masked_rows": False} for c in calls)
    fused, slow = fused_and_slow(compiled, *args, **kwargs)
    with torch.no_grad():
        eager = model(*args, **kwargs)
        want64 = copy.deepcopy(model).double()(*args, **kwargs)
    assert judge(fused, slow, want64).passed
    assert judge(fused, eager, want64).passed


class Attention(torch.nn.Module):
    """Self-attention through ``F.scaled_dot_product_attention`` with a run-time mask."""

    def __init__(self):
        super().__init__()
        self.qkv = torch.nn.Linear(16, 48)

    def heads(self, x):
        b, n, _ = x.shape
        return self.qkv(x).view(b, n, 3, 2, 8).permute(2, 0, 3, 1, 4)

    def forward(self, x, mask):
        q, k, v = self.heads(x)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


class HandWritten(Attention):
    """The same attention with its softmax written out: TensorRT's SOFTMAX layer, unfused."""

    def forward(self, x, mask):
        q, k, v = self.heads(x)
        return torch.softmax(q @ k.transpose(-2, -1) * 8 ** -0.5 + mask, -1) @ v


def masked_case():
    torch.manual_seed(0)
    x, mask = torch.randn(2, 5, 16), torch.randn(2, 1, 5, 5)
    mask[0, 0, 1] = -torch.inf  # query 1 of batch 0 sees no key: its row is zero
    mask[1, 0, :, 2] = -torch.inf  # key 2 of batch 1 is hidden from every query
    return x, mask


def compile_reference(model, inputs):
    return torch_trt_ref.compile(model, inputs, executor="reference", min_block_size=1)


def test_a_runtime_mask_with_fully_masked_rows_fuses_and_equals_the_slow_route():
    model = Attention().eval()
    x, mask = masked_case()
    compiled = compile_reference(model, [x, mask])
    (runner,) = runners(compiled)
    (call,) = fused_calls(runner)
    assert call["masked_rows"] and call["scale"] == pytest.approx(8 ** -0.5)
    fused, slow = fused_and_slow(compiled, x, mask)
    with torch.no_grad():
        want64 = model.double()(*to_float64([x, mask]))
    assert torch.equal(fused[0, :, 1], torch.zeros_like(fused[0, :, 1]))
    assert judge(fused, slow, want64).passed


def test_a_hand_written_softmax_does_not_fuse():
    model = HandWritten().eval()
    x, mask = masked_case()
    mask[0, 0, 1] = 0.0  # a hand-written softmax of a fully masked row is NaN
    compiled = compile_reference(model, [x, mask])
    (runner,) = runners(compiled)
    assert not fused_calls(runner)
    fused, slow = fused_and_slow(compiled, x, mask)
    assert torch.allclose(fused, slow, rtol=1e-5, atol=1e-6)  # the linear's fused bias


def test_scores_read_outside_the_pattern_do_not_fuse():
    x, mask = masked_case()
    compiled = compile_reference(Attention().eval(), [x, mask])
    (engine,) = [m for m in compiled.modules() if isinstance(m, EngineModule)]
    snapshot = engine.engine.snapshot
    scores = next(layer for layer in snapshot.layers if layer.kind == "MATRIX_MULTIPLY"
                  and layer.attrs["op1"] == "TRANSPOSE" and len(layer.outputs[0].shape) == 4)
    tapped = dataclasses.replace(snapshot, outputs=[*snapshot.outputs, scores.outputs[0].name])
    runner = ReferenceRunner(tapped)
    assert not fused_calls(runner)
    named = {info.name: value for info, value in zip(tapped.inputs, [x, mask])}
    with torch.no_grad():
        got, want = runner(dict(named)), run_snapshot(tapped, dict(named))
    assert all(torch.allclose(a, b, rtol=1e-5, atol=1e-6) for a, b in zip(got, want))
    assert ReferenceRunner(snapshot).prepared.fast != runner.prepared.fast  # untapped: fused


def test_unread_layers_are_dropped_but_assertions_and_outputs_kept():
    layer = lambda kind: type("L", (), {"kind": kind})()  # noqa: E731
    calls = [(None, (1,), {}, (2,)), (None, (2,), {}, (3,)), (None, (1,), {}, (4,)),
             (None, (1,), {}, (5,)), (None, (1,), {}, ())]
    layers = [layer(k) for k in ("UNARY", "UNARY", "UNARY", "ASSERTION", "ASSERTION")]
    kept, kept_layers = drop_unread(calls, layers, {3})
    assert kept == [calls[0], calls[1], calls[3], calls[4]]
    assert [x.kind for x in kept_layers] == ["UNARY", "UNARY", "ASSERTION", "ASSERTION"]
