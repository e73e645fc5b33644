"""Half-precision compiles whose PyTorch segments hold an op with no fp16/bf16 kernel on the
CPU (``special_erfcx``): the op runs in float32 between casts, the report says so, and the
result passes the float64 rule against eager computed the same way (issue 15)."""

from __future__ import annotations

import pytest
import torch

import torch_trt_ref
from torch_trt_ref.accuracy import judge


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
