"""Every value a compiled module's weight program holds round-trips through ``torch.save``
(which ``torch_trt_ref.save`` and ``torch.save(compiled)`` use): random chains of weight
ops, zoo models with attention, and the issue-21 model whose program recorded
``torch.contiguous_format`` (a value ``torch.save`` cannot write)."""

import io

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import torch_trt_ref
from torch_trt_ref.accuracy import tensors

# weight ops the weight program records (torch calls on a parameter), each keeping a
# rank-2 [8, 8] float tensor; memory formats and dtypes are the non-tensor arguments
WEIGHT_OPS = {
    "permute_contiguous": lambda w: w.t().contiguous(),
    "clone_contiguous": lambda w: w.clone(memory_format=torch.contiguous_format),
    "clone_preserve": lambda w: w.clone(memory_format=torch.preserve_format),
    "channels_last": lambda w: w.reshape(1, 1, 8, 8).contiguous(
        memory_format=torch.channels_last).reshape(8, 8),
    "to_half_and_back": lambda w: w.to(torch.float16).to(dtype=torch.float32),
    "layer_norm": lambda w: torch.nn.functional.layer_norm(w, (8,)),
    "softmax": lambda w: torch.softmax(w, -1),
    "empty_like_copy": lambda w: torch.empty_like(w, memory_format=torch.contiguous_format)
    .copy_(w),
    "scale": lambda w: w * 0.5 + 1,
}


class Chain(torch.nn.Module):
    def __init__(self, ops):
        super().__init__()
        self.ops = ops
        self.w = torch.nn.Parameter(torch.randn(8, 8, generator=torch.Generator().manual_seed(0)))

    def forward(self, x):
        w = self.w
        for name in self.ops:
            w = WEIGHT_OPS[name](w)
        return torch.relu(x @ w) * 2 + 1


def _round_trip(value):
    buffer = io.BytesIO()
    torch.save(value, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=False)


def _check_program(compiled, model):
    program = compiled.weight_program
    loaded = _round_trip(program)
    state = {k: v.detach() for k, v in model.state_dict(keep_vars=True).items()}
    want, got = program.run(state), loaded.run(state)
    assert want.keys() == got.keys()
    for key in want:
        assert torch.equal(want[key], got[key]), key


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(sorted(WEIGHT_OPS)), min_size=1, max_size=4))
def test_weight_program_of_random_weight_op_chains_round_trips(ops):
    model = Chain(ops).eval()
    x = torch.randn(4, 8)
    compiled = torch_trt_ref.compile(model, [x], min_block_size=1)
    _check_program(compiled, model)


class Issue21(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.t = torch.nn.Parameter(torch.randn(4, 8, 8))

    def forward(self, x):
        return torch.softmax(x + self.t.permute(2, 0, 1).contiguous(), -1).relu() * 2 + 1


def test_a_program_holding_contiguous_format_saves_and_loads(tmp_path):
    model = Issue21().eval()
    x = torch.randn(8, 4, 8)
    compiled = torch_trt_ref.compile(model, [x], min_block_size=1)
    loaded = torch_trt_ref.load(torch_trt_ref.save(compiled, tmp_path / "m.ttr"))
    assert torch.equal(loaded(x), compiled(x))
    assert torch.equal(_round_trip(compiled)(x), compiled(x))  # torch.save(compiled)
    _check_program(compiled, model)


@pytest.mark.parametrize("name", ["swin_t", "bert_2layer"])
def test_weight_program_of_zoo_models_with_attention_round_trips(name):
    from zoo.registry import get

    entry = get(name)
    model = entry.factory()
    args, kwargs = entry.inputs()
    compiled = torch_trt_ref.compile(model, list(args), kwarg_inputs=kwargs,
                                     **entry.compile_settings)
    _check_program(compiled, model)
    assert all(torch.equal(a, b) for a, b in zip(
        tensors(_round_trip(compiled)(*args, **kwargs)), tensors(compiled(*args, **kwargs))))
