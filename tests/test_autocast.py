"""Autocast with fp32 accumulation (``enable_autocast``, ``use_fp32_acc``; docs/precision.md
"Autocast"): a rule per float node chooses fp16/bf16 or fp32 and the report says why. Oracle:
eager float64 through the accuracy rule. A model whose fp16 overflows eagerly is judged
against eager fp16 and float64: where eager fp16 broke, the rule holds each element to
float64 within a few fp16 ulps (Note [NaN and infinity, position by position]), and the
plain fp16 compile is non-finite where float64 is finite; eager bf16 (fp32's range) is a
second check. Quick zoo models against eager fp16."""

from __future__ import annotations

import copy
import math

import pytest
import torch

import torch_trt_ref
from torch_trt_ref import CompilationSettings
from torch_trt_ref.accuracy import K_SMALL, cast_floats, judge, rmse, to_float64

zoo_registry = pytest.importorskip("zoo.registry")


class Overflow(torch.nn.Module):
    """A large-activation layer (|h| ~ 1e5 > fp16's 65504), normalized back to ~1."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.up, self.down = torch.nn.Linear(16, 64), torch.nn.Linear(64, 8)
        with torch.no_grad():
            self.up.weight.mul_(1e5)

    def forward(self, x):
        h = torch.relu(self.up(x))
        return self.down(h / h.amax(-1, keepdim=True))


@pytest.fixture(scope="module")
def overflow():
    model = Overflow().eval()
    x = torch.randn(4, 16, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ref = copy.deepcopy(model).double()(x.double())
        bf16 = copy.deepcopy(model).bfloat16()(x.bfloat16()).float()
        fp16 = copy.deepcopy(model).half()(x.half())
    auto = torch_trt_ref.compile(model, [x], enable_autocast=True, min_block_size=1,
                                 autocast_calibration_dataloader=[(x,)])
    plain = torch_trt_ref.compile(model, [x], precision="fp16", min_block_size=1)
    return model, x, ref, bf16, fp16, auto, plain


def test_fp16_overflows_eagerly_and_without_autocast(overflow):
    model, x, ref, bf16, fp16, _, plain = overflow
    assert torch.isfinite(ref).all() and not torch.isfinite(fp16).all()
    out = plain(x)
    # non-finite where float64 is finite: no tolerance covers it
    assert not torch.isfinite(out).all() and math.isnan(rmse(out, ref))
    with torch.no_grad():
        assert not judge(out, model(x), ref).passed  # against the model's own precision
    assert not judge(out, bf16, ref).passed
    # the rule forgives a result broken exactly as eager fp16 is (torch's `same` does too),
    # so the failure above is stated against float64 itself
    assert judge(out.half(), fp16, ref).passed


def test_with_autocast_it_passes_the_float64_rule(overflow):
    _, x, ref, bf16, fp16, auto, _ = overflow
    out = auto(x)
    assert torch.isfinite(out).all() and out.dtype == torch.float32
    # judged in the compile precision against eager fp16 and float64: eager fp16 broke at
    # every element, so each must be within K_SMALL fp16 ulps of float64
    assert not torch.isfinite(fp16).any()
    verdict = judge(out.half(), fp16, ref)
    assert verdict.passed, verdict.message
    eps = torch.finfo(torch.float16).eps
    assert ((out.half().double() - ref).abs() <= K_SMALL * eps * ref.abs()).all()
    verdict = judge(out, bf16, ref)
    assert verdict.passed, verdict.message


def test_the_report_names_each_fp32_node_and_why(overflow):
    *_, auto, _ = overflow
    decisions = {d["node"]: d for d in auto.compile_report.autocast}
    assert decisions["addmm"]["dtype"] == "fp32"
    assert "max |output|" in decisions["addmm"]["reason"]
    assert "max |input|" in decisions["div"]["reason"]  # its output is small, its input not
    assert decisions["addmm_1"]["dtype"] == "fp16"
    assert decisions["addmm_1"]["reason"] == "default"
    assert "in fp32:" in auto.compile_report.render()


def test_without_calibration_the_threshold_rule_is_off(overflow):
    model, x, *_ = overflow
    auto = torch_trt_ref.compile(model, [x], enable_autocast=True, min_block_size=1)
    assert all("calibration" not in d["reason"] for d in auto.compile_report.autocast)
    assert not torch.isfinite(auto(x)).all()


def test_excluded_nodes_and_ops_keep_fp32(overflow):
    model, x, ref, bf16, *_ = overflow
    auto = torch_trt_ref.compile(model, [x], enable_autocast=True, min_block_size=1,
                                 autocast_excluded_nodes={"^up$"},
                                 autocast_excluded_ops={"aten.relu", "aten.amax",
                                                        "aten.div.Tensor"})
    decisions = {d["node"]: d for d in auto.compile_report.autocast}
    assert "autocast_excluded_nodes '^up$'" in decisions["addmm"]["reason"]
    assert "autocast_excluded_ops names aten.relu" in decisions["relu"]["reason"]
    verdict = judge(auto(x), bf16, ref)
    assert verdict.passed, verdict.message


def test_bf16_low_precision_type(overflow):
    model, x, ref, bf16, *_ = overflow
    auto = torch_trt_ref.compile(model, [x], enable_autocast=True, min_block_size=1,
                                 autocast_low_precision_type=torch.bfloat16,
                                 autocast_calibration_dataloader=[x])
    assert {d["dtype"] for d in auto.compile_report.autocast} == {"bf16", "fp32"}
    verdict = judge(auto(x), bf16, ref)
    assert verdict.passed, verdict.message


def _matmul_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.Linear(256, 8)).eval()


@pytest.mark.parametrize("settings", [dict(precision="fp16"), dict(enable_autocast=True)])
def test_fp32_accumulation_puts_matmuls_in_fp32_and_passes(settings):
    model, x = _matmul_model(), torch.randn(4, 256)
    acc = torch_trt_ref.compile(model, [x], use_fp32_acc=True, min_block_size=1, **settings)
    casts = [n for m in acc.modules() if isinstance(m, torch.fx.GraphModule)
             for n in m.graph.nodes if n.op == "call_module"]
    assert casts  # an engine
    with torch.no_grad():
        eager16 = copy.deepcopy(model).half()(x.half())
        ref = copy.deepcopy(model).double()(x.double())
    out = acc(x)
    verdict = judge(out.half() if out.dtype != torch.float16 else out, eager16, ref)
    assert verdict.passed, verdict.message


def test_fp32_accumulation_rewrites_each_matmul():
    from torch_trt_ref.capture import capture
    from torch_trt_ref.lowering import lower_program

    model, x = _matmul_model(), torch.randn(4, 256)
    ep = capture(model, [x])
    gm = lower_program(ep, CompilationSettings(precision="fp16", use_fp32_acc=True))
    for node in gm.graph.find_nodes(op="call_function", target=torch.ops.aten.addmm.default):
        assert node.meta["val"].dtype == torch.float32
        assert all(a.meta["val"].dtype == torch.float32 for a in node.all_input_nodes)
        (user,) = node.users
        assert user.kwargs.get("dtype") == torch.float16


@pytest.mark.parametrize("name", ["resnet18", "bert_2layer", "gpt2_2layer"])
def test_quick_zoo_models_with_autocast_pass_the_float64_rule(name):
    entry = zoo_registry.get(name)
    model = entry.factory()
    args, kwargs = entry.inputs()
    compiled = torch_trt_ref.compile(model, args, kwargs, enable_autocast=True,
                                     autocast_calibration_dataloader=[args],
                                     **entry.compile_settings)
    assert any(d["dtype"] == "fp16" for d in compiled.compile_report.autocast)
    with torch.no_grad():
        out = compiled(*args, **kwargs)
        eager16 = copy.deepcopy(model).half()(*cast_floats(args, torch.float16),
                                               **cast_floats(kwargs, torch.float16))
        ref = copy.deepcopy(model).double()(*to_float64(args), **to_float64(kwargs))
    verdict = judge(cast_floats(out, torch.float16), eager16, ref)
    assert verdict.passed, verdict.message


@pytest.mark.parametrize("kwargs, match", [
    (dict(enable_autocast=True, precision="fp16"), "use precision='fp32'"),
    (dict(enable_autocast=True, autocast_low_precision_type="fp8"), "'fp16' or 'bf16'"),
    (dict(enable_autocast=True, autocast_excluded_nodes={"(unclosed"}), "not a regular"),
    (dict(enable_autocast=True, autocast_excluded_ops={"aten.nosuchop"}), "unknown op"),
    (dict(enable_autocast=True, autocast_max_output_threshold=0), "positive number"),
    (dict(enable_autocast=True, autocast_calibration_dataloader=3), "iterable of batches"),
    (dict(autocast_excluded_nodes={"up"}), "without enable_autocast"),
    (dict(use_fp32_acc=True), "takes precision='fp16'"),
    (dict(enable_autocast="yes"), "True or False"),
])
def test_bad_autocast_settings_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        CompilationSettings(**kwargs)
