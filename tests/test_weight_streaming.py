"""Weight streaming on the reference executor (``compile(..., enable_weight_streaming=True)``
and ``runtime.weight_streaming``; docs/deploy.md "Weight streaming"): at most the budget's
bytes of engine weights stay on the device, the rest are copied in per layer, and the
outputs are bit-identical at every budget. Oracles: the module at the full budget (the
slow-free route) and eager float64 through the accuracy rule."""

from __future__ import annotations

import copy

import pytest
import torch

import torch_trt_ref
from torch_trt_ref.accuracy import judge, tensors
from torch_trt_ref.runtime import weight_streaming
from torch_trt_ref.runtime.module import EngineModule

transformers = pytest.importorskip("transformers")


def _mlp(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(*[m for _ in range(4) for m in (torch.nn.Linear(32, 32),
                                                                torch.nn.ReLU())]).eval()


@pytest.fixture(scope="module")
def mlp():
    model, x = _mlp(), torch.randn(4, 32)
    # relu in PyTorch: four engines, so the budget is split over several
    compiled = torch_trt_ref.compile(model, [x], enable_weight_streaming=True, min_block_size=1,
                                     torch_executed_ops={"aten.relu"})
    return model, x, compiled, compiled(x)


def _engines(module):
    return [m for m in module.modules() if isinstance(m, EngineModule)]


@pytest.mark.parametrize("fraction", [0.0, 0.2, 0.5, 0.75, 1.0])
def test_bit_identical_at_every_budget_and_the_float64_rule(mlp, fraction):
    model, x, compiled, full = mlp
    with weight_streaming(compiled) as ctx:
        ctx.device_budget = int(fraction * ctx.total_device_budget)
        out = compiled(x)
        assert ctx.resident_bytes <= ctx.device_budget
        assert ctx.resident_bytes + ctx.streamed_bytes == ctx.total_device_budget
    assert torch.equal(out, full)
    with torch.no_grad():
        verdict = judge(out, model(x), copy.deepcopy(model).double()(x.double()))
    assert verdict.passed, verdict.message


def test_streamed_bytes_are_copied_at_every_call(mlp):
    _, x, compiled, _ = mlp
    with weight_streaming(compiled) as ctx:
        assert len(_engines(compiled)) == 4
        assert ctx.total_device_budget == 4 * (32 * 32 + 32) * 4
        ctx.device_budget = ctx.total_device_budget // 2
        compiled(x)
        compiled(x)
        assert ctx.streamed_bytes == ctx.total_device_budget // 2
        assert ctx.copied_bytes == 2 * ctx.streamed_bytes
        ctx.device_budget = 0
        compiled(x)
        assert ctx.resident_bytes == 0 and ctx.copied_bytes == ctx.total_device_budget


def test_the_budget_returns_on_exit(mlp):
    _, x, compiled, full = mlp
    with weight_streaming(compiled) as ctx:
        ctx.device_budget = 0
        compiled(x)
    assert all(m.handle.weight_budget is None and m.handle.streaming is None
               for m in _engines(compiled))
    assert torch.equal(compiled(x), full)


def test_streamed_weights_live_off_the_device_only_where_they_stream(mlp):
    _, x, compiled, _ = mlp
    with weight_streaming(compiled) as ctx:
        ctx.device_budget = (32 * 32 + 32) * 4 * 2  # two engines' weights resident
        compiled(x)
        plans = [m.handle.streaming for m in _engines(compiled)]
        assert [bool(p.streamed) for p in plans] == [False, False, True, True]
        assert ctx.resident_bytes == ctx.device_budget


@pytest.mark.parametrize("budget", [-1, 10**12, 1.5, True])
def test_bad_budgets_are_named(mlp, budget):
    *_, compiled, _ = mlp
    with weight_streaming(compiled) as ctx:
        with pytest.raises(ValueError, match="device_budget must be an int of bytes in 0.."):
            ctx.device_budget = budget


def test_a_module_compiled_without_it_is_refused():
    model, x = _mlp(), torch.randn(2, 32)
    compiled = torch_trt_ref.compile(model, [x], min_block_size=1)
    with pytest.raises(ValueError, match="enable_weight_streaming=True"):
        with weight_streaming(compiled):
            pass
    with pytest.raises(ValueError, match="enable_weight_streaming must be True or False"):
        torch_trt_ref.compile(model, [x], enable_weight_streaming="yes")


def test_refit_and_save_load_keep_streaming(mlp, tmp_path):
    model, x, _, _ = mlp
    compiled = torch_trt_ref.compile(model, [x], enable_weight_streaming=True, min_block_size=1,
                                     torch_executed_ops={"aten.relu"})
    new = _mlp(seed=1)
    fresh = torch_trt_ref.compile(new, [x], min_block_size=1, torch_executed_ops={"aten.relu"})
    with weight_streaming(compiled) as ctx:
        ctx.device_budget = ctx.total_device_budget // 4
        torch_trt_ref.refit(compiled, new)
        assert torch.equal(compiled(x), fresh(x))
        assert ctx.streamed_bytes == ctx.total_device_budget - ctx.total_device_budget // 4
    loaded = torch_trt_ref.load(torch_trt_ref.save(compiled, tmp_path / "m.trtref"))
    with weight_streaming(loaded) as ctx:
        ctx.device_budget = 0
        assert torch.equal(loaded(x), fresh(x)) and ctx.copied_bytes > 0


def test_a_tiny_bert_streams_bit_identically():
    torch.manual_seed(0)
    config = transformers.BertConfig(num_hidden_layers=2, hidden_size=32, num_attention_heads=2,
                                     intermediate_size=64, vocab_size=64)
    model = transformers.BertModel(config, add_pooling_layer=False).eval()
    ids = torch.randint(0, 64, (1, 8), generator=torch.Generator().manual_seed(1))
    compiled = torch_trt_ref.compile(model, [ids], enable_weight_streaming=True)
    full = compiled(ids)
    with weight_streaming(compiled) as ctx:
        for budget in (0, ctx.total_device_budget // 3):
            ctx.device_budget = budget
            out = compiled(ids)
            assert all(torch.equal(a, b) for a, b in zip(tensors(out), tensors(full),
                                                         strict=True))
            assert ctx.streamed_bytes >= ctx.total_device_budget - budget


def _param_bytes(model):
    """What PyTorch itself counts: each parameter once (tied ones too), at its dtype."""
    return sum(p.numel() * p.element_size() for p in model.parameters())


def test_dynamic_batch_streams_bit_identically_at_every_size():
    from torch_trt_ref import Input

    model = _mlp(seed=2)
    compiled = torch_trt_ref.compile(
        model, [Input(min_shape=(1, 32), opt_shape=(4, 32), max_shape=(8, 32))],
        enable_weight_streaming=True, min_block_size=1)
    for batch in (1, 5, 8):
        x = torch.randn(batch, 32, generator=torch.Generator().manual_seed(batch))
        full = compiled(x)
        with weight_streaming(compiled) as ctx:
            ctx.device_budget = ctx.total_device_budget // 3
            out = compiled(x)
        assert torch.equal(out, full)
        with torch.no_grad():
            verdict = judge(out, model(x), copy.deepcopy(model).double()(x.double()))
        assert verdict.passed, (batch, verdict.message)


def test_the_total_is_the_models_parameter_bytes(mlp):
    model, _, compiled, _ = mlp
    with weight_streaming(compiled) as ctx:
        assert ctx.total_device_budget == _param_bytes(model)


def test_fp16_streams_half_the_bytes_and_passes_the_rule():
    model, x = _mlp(seed=3), torch.randn(3, 32)
    compiled = torch_trt_ref.compile(model, [x], precision="fp16", min_block_size=1,
                                     enable_weight_streaming=True)
    full = compiled(x)
    with weight_streaming(compiled) as ctx:
        assert ctx.total_device_budget == _param_bytes(copy.deepcopy(model).half())
        ctx.device_budget = 0
        out = compiled(x)
        assert ctx.copied_bytes == ctx.total_device_budget
    assert torch.equal(out, full)
    with torch.no_grad():
        verdict = judge(out, copy.deepcopy(model).half()(x.half()).float(),
                        copy.deepcopy(model).double()(x.double()))
    assert verdict.passed, verdict.message


class _Tied(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(16, 16)

    def forward(self, x):
        return self.lin(torch.relu(self.lin(x)))


def test_a_weight_read_twice_counts_once():
    torch.manual_seed(4)
    model, x = _Tied().eval(), torch.randn(2, 16)
    compiled = torch_trt_ref.compile(model, [x], enable_weight_streaming=True,
                                     min_block_size=1)
    full = compiled(x)
    with weight_streaming(compiled) as ctx:
        assert ctx.total_device_budget == _param_bytes(model)  # 16*16+16 floats, once
        ctx.device_budget = 0
        assert torch.equal(compiled(x), full)


def test_raising_the_budget_to_full_stops_the_copies(mlp):
    _, x, compiled, full = mlp
    with weight_streaming(compiled) as ctx:
        ctx.device_budget = 0
        compiled(x)
        assert ctx.copied_bytes == ctx.total_device_budget
        ctx.device_budget = ctx.total_device_budget
        assert torch.equal(compiled(x), full)
        assert ctx.streamed_bytes == 0 and ctx.copied_bytes == 0


def test_a_lora_adapter_refit_while_streaming_equals_peft_merged_model():
    peft = pytest.importorskip("peft")
    base, x = _mlp(seed=5), torch.randn(4, 32)
    compiled = torch_trt_ref.compile(base, [x], enable_weight_streaming=True,
                                     min_block_size=1)
    config = peft.LoraConfig(r=4, lora_alpha=8, target_modules=["0", "4"], init_lora_weights=False)
    lora = peft.get_peft_model(copy.deepcopy(base), config).eval()
    merged = lora.merge_and_unload()  # peft's own merge: the oracle
    with weight_streaming(compiled) as ctx:
        ctx.device_budget = ctx.total_device_budget // 2
        torch_trt_ref.refit(compiled, merged)
        out = compiled(x)
        assert ctx.copied_bytes > 0
    with torch.no_grad():
        assert not torch.allclose(merged(x), base(x))  # the adapter changed the outputs
        verdict = judge(out, merged(x), copy.deepcopy(merged).double()(x.double()))
    assert verdict.passed, verdict.message
