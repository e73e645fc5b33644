"""float32 inside half-precision compiles. An op with no fp16/bf16 kernel on the CPU
(``special_erfcx``) in a PyTorch segment runs in float32 between casts, the report says so,
and the result passes the float64 rule against eager computed the same way (issue 15). A
model already in fp16 keeps the float32 it asks for (Gemma3's RMSNorm), as eager does
(Note [A model already in the compile precision]; issue 39)."""

from __future__ import annotations

import pytest
import torch

import torch_trt_ref
from torch_trt_ref import CompilationSettings
from torch_trt_ref.accuracy import judge
from torch_trt_ref.capture import capture
from torch_trt_ref.lowering import lower_program


class Erfcx(torch.nn.Module):
    def forward(self, x):
        y = torch.special.erfcx(torch.relu(x) * 2 + 1)
        return torch.tanh(y) + x


@pytest.mark.parametrize("precision,dtype", [("fp16", torch.float16),
                                             ("bf16", torch.bfloat16)])
def test_op_without_half_kernel_runs_in_float32_in_its_pytorch_segment(precision, dtype):
    model, x = Erfcx().eval(), torch.randn(4, 8)
    with pytest.raises(NotImplementedError, match="not implemented for"):
        model(x.to(dtype))  # the premise: eager has no kernel for this dtype
    compiled = torch_trt_ref.compile(model, (x,), precision=precision, min_block_size=1)
    report = compiled.compile_report
    assert report.counts["torch"] == 1
    [(segment, lines)] = report.upcasts.items()
    assert "special_erfcx" in lines[0] and "runs in float32" in lines[0]
    assert "runs in float32" in report.render()
    out = compiled(x)
    # eager in the precision, as a CPU would give it with the kernel: each op in float32
    # on values rounded to the dtype, rounded back
    xh = x.to(dtype)
    y = torch.special.erfcx((torch.relu(xh) * 2 + 1).float()).to(dtype)
    eager = (torch.tanh(y) + xh).float()
    verdict = judge(out, eager, model(x.double()))
    assert verdict.passed, verdict.message


def test_fp32_compile_adds_no_casts():
    compiled = torch_trt_ref.compile(Erfcx().eval(), (torch.randn(4, 8),), min_block_size=1)
    assert compiled.compile_report.upcasts == {}


def _gemma_norm(dtype):
    """transformers' Gemma3 RMSNorm (statistics and its ``1 + weight`` scale in float32, the
    result cast back), with a random weight."""
    from transformers.models.gemma3.modeling_gemma3 import Gemma3RMSNorm

    torch.manual_seed(0)
    norm = Gemma3RMSNorm(32, eps=1e-6)
    with torch.no_grad():
        norm.weight.normal_(0, 0.5)
    return norm.eval().to(dtype)


def test_a_model_in_fp16_keeps_the_float32_it_asks_for():
    """A 2-layer Gemma3's post-feedforward RMSNorm sees |x| ~5e-4 (measured in float64):
    x^2 ~1e-7..1e-6 is below fp16's smallest normal (6.1e-5), so a norm computed in fp16 is
    off by far more than eager fp16's (which computes it in float32); that was one decode
    step's logits outside the float64 rule (docs/llm.md, issue 39)."""
    norm = _gemma_norm(torch.float16)
    x = (torch.randn(2, 5, 32, generator=torch.Generator().manual_seed(1)) * 5e-4).half()
    gm = lower_program(capture(norm, (x,)), CompilationSettings(precision="fp16"))
    fp32 = [n.target.__name__ for n in gm.graph.nodes if n.op == "call_function"
            and getattr(n.meta.get("val"), "dtype", None) == torch.float32]
    assert "mean.dim" in fp32 and "rsqrt.default" in fp32, fp32
    compiled = torch_trt_ref.compile(norm, (x,), precision="fp16", min_block_size=1)
    assert compiled.compile_report.counts == {"tensorrt": 1}
    with torch.no_grad():
        verdict = judge(compiled(x), norm(x), _gemma_norm(torch.float64)(x.double()))
    assert verdict.passed, verdict.message


def test_an_fp32_model_compiled_in_fp16_computes_in_fp16():
    """The same norm in float32 compiled with precision fp16: every float node computes in
    fp16 (the model's float32 is its dtype, not a choice), the output cast back."""
    x = torch.randn(2, 5, 32)
    gm = lower_program(capture(_gemma_norm(torch.float32), (x,)),
                       CompilationSettings(precision="fp16"))
    dtypes = [(n.target.__name__, n.meta["val"].dtype) for n in gm.graph.nodes
              if n.op == "call_function" and isinstance(n.meta.get("val"), torch.Tensor)]
    assert dtypes[-1] == ("_to_copy.default", torch.float32)  # the output, cast back
    assert {d for _, d in dtypes[:-1]} == {torch.float16}, dtypes
