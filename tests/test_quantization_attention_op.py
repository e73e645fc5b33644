"""Quantized attention as one op (``torch_trt_ref::quantized_sdpa``, Note [Quantized attention
is one node]): the op equals the quantizer modules it replaces bit for bit, its converter
passes the float64 rule against the eager quantized model for float/bool masks, causal,
GQA and dynamic shapes, its validator sends what TensorRT rejects to PyTorch with a reason,
the report names it, and a saved, loaded, refit module equals a fresh compile."""

import copy

import pytest
import torch
from torch import nn

import torch_trt_ref
from torch_trt_ref.accuracy import judge
from torch_trt_ref.quantization import quantize, quantizers
from torch_trt_ref.quantization.attention_op import QUANTIZED_SDPA
from torch_trt_ref.runtime.module import EngineModule


class _Sdpa(nn.Module):
    """Projections around one fused SDPA call with ``kwargs`` (mask given to forward)."""

    def __init__(self, heads=4, kv_heads=4, dim=16, **kwargs):
        super().__init__()
        self.heads, self.kv_heads, self.kwargs = heads, kv_heads, kwargs
        head = dim // heads
        self.q, self.kv = nn.Linear(dim, dim), nn.Linear(dim, 2 * kv_heads * head)
        self.out = nn.Linear(dim, dim)

    def forward(self, x, mask=None):
        b, s, d = x.shape
        q = self.q(x).reshape(b, s, self.heads, -1).transpose(1, 2)
        k, v = (t.reshape(b, s, self.kv_heads, -1).transpose(1, 2)
                for t in self.kv(x).chunk(2, -1))
        ctx = nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                                         **self.kwargs)
        return self.out(ctx.transpose(1, 2).reshape(b, s, d))


class _Causal(_Sdpa):
    """Causal attention with no mask argument."""

    def __init__(self):
        super().__init__(is_causal=True)

    def forward(self, x):
        return super().forward(x)


def _data(seq=6, mask=None, n=3):
    g = torch.Generator().manual_seed(0)
    return [(torch.randn(2, seq, 16, generator=g),) + ((mask,) if mask is not None else ())
            for _ in range(n)]


def _float_mask(seq=6):
    mask = torch.zeros(1, 1, seq, seq)
    mask[..., -1] = float("-inf")
    return mask


def _quantized(model, data, precision="int8"):
    torch.manual_seed(0)
    return quantize(model.eval(), data, precision=precision, attention=True, progress=False)


def _kinds(compiled):
    return [layer.kind for m in compiled.modules() if isinstance(m, EngineModule)
            for layer in m.engine.snapshot.layers]


def _judge(compiled, qm, inputs):
    verdict = judge(compiled(*inputs), qm(*inputs),
                    copy.deepcopy(qm).double()(*(t.double() if t.is_floating_point() else t
                                                 for t in inputs)))
    assert verdict.passed, verdict.message


@pytest.mark.parametrize("precision", ["int8", "fp8"])
def test_op_equals_the_quantizer_modules(precision):
    """The op's kernel is the quantizer modules' arithmetic: the model with a forward hook
    on its quantizers (which runs them as modules, as the tie-aware oracle does) gives the
    same bits, in float32 and float64."""
    data = _data(mask=_float_mask())
    qm = _quantized(_Sdpa(), data, precision)
    x, mask = data[0][0] * 1.3, data[0][1]
    for dtype in (torch.float32, torch.float64):
        model = copy.deepcopy(qm).to(dtype)
        fused = model(x.to(dtype), mask.to(dtype))
        for q in quantizers(model).values():
            q.register_forward_hook(lambda m, i, o: o)
        assert torch.equal(model(x.to(dtype), mask.to(dtype)), fused)
    exported = torch.export.export(qm, (x, mask))
    assert [n.target for n in exported.graph.nodes].count(QUANTIZED_SDPA) == 1


@pytest.mark.parametrize("precision", ["int8", "fp8"])
@pytest.mark.parametrize("case", ["bool_mask", "causal", "gqa_scale"])
def test_converter_variants(case, precision):
    seq = 6
    if case == "bool_mask":
        mask = torch.rand(seq, seq, generator=torch.Generator().manual_seed(3)) > 0.3
        mask[:, 0] = True  # no fully masked row (eager gives NaN there)
        model, data = _Sdpa(), _data(mask=mask)
    elif case == "causal":
        model, data = _Sdpa(is_causal=True), _data()
    else:
        model, data = _Sdpa(kv_heads=2, scale=0.3, enable_gqa=True), _data()
    qm = _quantized(model, data, precision)
    inputs = (data[0][0] * 1.3,) + data[0][1:]
    compiled = torch_trt_ref.compile(qm, list(inputs), min_block_size=1)
    assert compiled.compile_report.counts == {"tensorrt": 1}
    kinds = _kinds(compiled)
    assert (kinds.count("QUANTIZE"), kinds.count("DEQUANTIZE")) == (10, 10)  # 3 Linear + qkvP
    _judge(compiled, qm, inputs)


def test_dynamic_sequence_length():
    data = _data()
    # in a Sequential: the owner's forward takes (*args, **kwargs), and torch.export's
    # dynamic shapes are given per argument of the root's forward
    qm = _quantized(nn.Sequential(_Causal()), data)
    spec = torch_trt_ref.Input(min_shape=(1, 2, 16), opt_shape=(2, 6, 16),
                               max_shape=(4, 9, 16))
    compiled = torch_trt_ref.compile(qm, [spec], min_block_size=1)
    assert compiled.compile_report.counts == {"tensorrt": 1}
    for shape in ((1, 2, 16), (3, 9, 16)):
        _judge(compiled, qm, (torch.randn(shape, generator=torch.Generator().manual_seed(5)),))


def test_report_names_it_and_rejected_runs_in_pytorch():
    data = _data(mask=_float_mask())
    qm = _quantized(_Sdpa(), data)
    x, mask = data[0]
    compiled = torch_trt_ref.compile(qm, [x, mask], min_block_size=1)
    named = [w for w in compiled.compile_report.support["quantizers"].values()
             if "attention" in w]
    assert named == ["int8 per-tensor attention q/k/v/P, activation, TensorRT"]
    assert "int8 per-tensor attention q/k/v/P x1" in compiled.compile_report.render()
    # amax 0 (an all-zero value tensor): TensorRT rejects a scale of 0; the op runs eagerly
    next(q for n, q in quantizers(qm).items() if n.endswith("sdpa0_v")).amax.zero_()
    compiled = torch_trt_ref.compile(qm, [x, mask], min_block_size=1)
    reasons = compiled.partition_result.rejected
    assert any("amax_v of 0" in r for r in reasons.values()), reasons
    assert torch.equal(compiled(x, mask), qm(x, mask))


_FRESH = """
import sys, torch, torch_trt_ref
from tests.test_quantization_attention_op import _Sdpa, _data, _float_mask, _quantized
path = sys.argv[1]
loaded = torch_trt_ref.load(path)
torch.manual_seed(1)  # new weights: another seed, re-calibrated scales (q, k, v, P too)
new = _quantized(_Sdpa(), [(d[0] * 2, d[1]) for d in _data(mask=_float_mask())])
torch_trt_ref.refit(loaded, new)
fresh = torch_trt_ref.compile(new, list(_data(mask=_float_mask())[0]), min_block_size=1)
x, mask, old = torch.load(sys.argv[2])
assert torch.equal(loaded(x, mask), fresh(x, mask)), (loaded(x, mask) - fresh(x, mask)).abs().max()
assert not torch.equal(loaded(x, mask), old), "refit changed nothing"
print("ok")
"""


def test_saved_loaded_refit_equals_fresh_compile(tmp_path):
    from tests.deploy_programs import run_fresh

    data = _data(mask=_float_mask())
    qm = _quantized(_Sdpa(), data)
    compiled = torch_trt_ref.compile(qm, list(data[0]), min_block_size=1)
    torch_trt_ref.save(compiled, tmp_path / "q.ttr")
    x, mask = data[1]
    torch.save((x, mask, compiled(x, mask)), tmp_path / "old.pt")
    assert "ok" in run_fresh(_FRESH, str(tmp_path / "q.ttr"), str(tmp_path / "old.pt")).stdout
