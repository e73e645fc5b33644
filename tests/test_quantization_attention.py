"""Quantizers on attention's batched matmuls (``quantize(..., attention=True)``): the SDPA
rewrite against torch's own scaled_dot_product_attention, the sites found in eager and SDPA
attention, the errors, and transformers BERT (default SDPA attention) in int8 and fp8
compiled to one engine holding the extra Q/DQ layers, under the float64 rule against the
eager quantized model."""

import copy

import pytest
import torch
from torch import nn

import torch_trt_ref
from torch_trt_ref.accuracy import judge
from torch_trt_ref.quantization import quantize, quantizers
from torch_trt_ref.quantization.attention import quantized_sdpa, sites
from torch_trt_ref.quantization.calibrate import MaxCalibrator
from torch_trt_ref.quantization.ptq import TensorQuantizer
from torch_trt_ref.runtime.module import EngineModule


class _Attention(nn.Module):
    """Multi-head self-attention: fused SDPA, or eager softmax(q kᵀ s + mask) v, beside a
    rotary-like matmul of two activations that is not attention."""

    def __init__(self, eager: bool, heads: int = 2, dim: int = 16):
        super().__init__()
        self.eager, self.heads = eager, heads
        self.qkv, self.out = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)

    def forward(self, x, mask):
        b, s, d = x.shape
        q, k, v = (t.reshape(b, s, self.heads, -1).transpose(1, 2)
                   for t in self.qkv(x).chunk(3, -1))
        angles = (torch.arange(s, dtype=x.dtype)[:, None]
                  @ torch.ones(1, d // self.heads, dtype=x.dtype))
        q = q + angles.sin() * 0.1  # matmul of two non-parameters, no softmax: left alone
        if self.eager:
            scores = torch.matmul(q, k.transpose(-2, -1)) / (d // self.heads) ** 0.5 + mask
            ctx = torch.softmax(scores, -1) @ v
        else:
            ctx = nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.out(ctx.transpose(1, 2).reshape(b, s, d))


def _data(n=3):
    g = torch.Generator().manual_seed(0)
    mask = torch.zeros(1, 1, 6, 6)
    mask[..., -1] = float("-inf")
    return [(torch.randn(2, 6, 16, generator=g), mask) for _ in range(n)]


def _kinds(compiled):
    kinds = [layer.kind for m in compiled.modules() if isinstance(m, EngineModule)
             for layer in m.engine.snapshot.layers]
    return kinds.count("QUANTIZE"), kinds.count("DEQUANTIZE")


def _passthrough():
    q = TensorQuantizer("int8")
    q.calibrator = MaxCalibrator()  # a calibrating quantizer returns its input
    return q


@pytest.mark.parametrize("kwargs", [
    {"attn_mask": torch.randn(2, 1, 5, 7)},
    {"attn_mask": torch.rand(5, 7) > 0.3},
    {"is_causal": True},
    {"scale": 0.3, "enable_gqa": True},
])
def test_quantized_sdpa_math_equals_torch_sdpa(kwargs):
    g = torch.Generator().manual_seed(1)
    q = torch.randn(2, 4, 5, 8, generator=g, dtype=torch.float64)
    heads = 2 if kwargs.get("enable_gqa") else 4
    k, v = (torch.randn(2, heads, 7, 8, generator=g, dtype=torch.float64) for _ in range(2))
    if kwargs.get("is_causal"):
        k, v = k[..., :5, :], v[..., :5, :]
    quantizers_ = {r: _passthrough() for r in "qkvp"}
    expected = nn.functional.scaled_dot_product_attention(q, k, v, **kwargs)
    torch.testing.assert_close(quantized_sdpa(quantizers_, q, k, v, **kwargs), expected)


def test_sites_of_eager_attention():
    a, p, s = ("matmul", True), ("matmul", False), ("softmax", True)
    # rotary matmul, Q·Kᵀ, softmax, P·V, a matmul with a parameter, another attention
    assert sites([a, a, s, a, p, a, s, a]) == {1: "matmul", 3: "matmul", 5: "matmul",
                                                7: "matmul"}
    assert sites([a, a]) == {}  # no softmax: no attention
    assert sites([("sdpa", True)]) == {0: "sdpa"}


@pytest.mark.parametrize("eager, names", [
    (False, {"sdpa1_q", "sdpa1_k", "sdpa1_v", "sdpa1_p"}),
    (True, {"bmm1_a", "bmm1_b", "bmm3_a", "bmm3_b"}),
])
@pytest.mark.parametrize("precision", ["int8", "fp8"])
def test_attention_quantizers_compile_to_one_engine(eager, names, precision):
    data = _data()
    torch.manual_seed(0)
    model = _Attention(eager).eval()
    qm = quantize(model, data, precision=precision, attention=True, progress=False)
    assert qm.quantization["attention"] == [""]
    found = quantizers(qm)
    assert {n.split(".")[-1] for n in found if n.startswith("attention_quantizers")} == names
    assert all(float(q.amax.max()) > 0 for q in found.values())
    x, mask = data[0]
    x = x * 1.3
    compiled = torch_trt_ref.compile(qm, [x, mask])
    eager_out = qm(x, mask)
    verdict = judge(compiled(x, mask), eager_out, copy.deepcopy(qm).double()(
        x.double(), mask.double()))
    assert verdict.passed, verdict.message
    assert compiled.compile_report.counts == {"tensorrt": 1}
    assert _kinds(compiled) == (8, 8)  # 2 Linear x (input, weight) + 4 attention inputs
    plain = quantize(model, data, precision=precision, progress=False)
    assert not torch.equal(plain(x, mask), eager_out)  # the attention quantizers act


def test_attention_errors():
    data = _data()
    with pytest.raises(ValueError, match="attention=True takes precision 'int8' or 'fp8'"):
        quantize(_Attention(False), data, precision="nvfp4", attention=True, progress=False)
    mlp = nn.Sequential(nn.Linear(16, 16), nn.Softmax(-1))
    with pytest.raises(ValueError, match="calls no scaled_dot_product_attention"):
        quantize(mlp, [d[0] for d in data], attention=True, progress=False)
    skipped = quantize(_Attention(False), data, attention=True, skip=["out"], progress=False)
    assert skipped.quantization["layers"] == ["qkv"]


@pytest.mark.parametrize("precision", ["int8", "fp8"])
def test_bert_default_attention_quantized(precision):
    from zoo import quantized
    from zoo.registry import get

    entry = get("bert_2layer")
    model = entry.factory()
    args, kwargs = entry.inputs()
    assert model.config._attn_implementation == "sdpa"
    with torch.no_grad():
        fp32 = model(*args, **kwargs)
    qm, record = quantized.prepare(model, precision, args, kwargs, attention=True)
    assert record["attention"] == 2  # one owner per layer
    compiled = torch_trt_ref.compile(qm, args, kwargs, **entry.compile_settings)
    assert compiled.compile_report.counts == {"tensorrt": 1}
    assert quantized.layer_counts(compiled)["quantize"] == 26 + 2 * 4
    with torch.no_grad():
        out = compiled(*args, **kwargs)
    acc = quantized.accuracy(qm, args, kwargs, fp32, out, entry.tolerance(precision))
    assert acc["passed"], acc["message"]
    assert acc["cosine"] > 0.99
