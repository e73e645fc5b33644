"""Dynamic ranges as users declare them (Note [Tracing dynamic dims] in capture.py): a batch
range 1..8 optimized for batch 1, a sequence range 1..128 optimized for 1, small ranges such
as 1..2, and a dim the model forces static (a clear error naming the dim and the model
line). Every compiled module is checked at min, opt, max and sizes between against eager
in float64 (torch_trt_ref.accuracy). A model that branches on a declared size is compiled
per branch (Note [Sizes the trace does not cover] in size_cover.py)."""

import copy

import pytest
import torch
import torchvision
from transformers import (
    BertConfig,
    BertModel,
    GPT2Config,
    GPT2LMHeadModel,
    LlamaConfig,
    LlamaForCausalLM,
)

import torch_trt_ref
from torch_trt_ref import Input
from torch_trt_ref.accuracy import judge
from torch_trt_ref.capture import DynamicShapeError, trace_shape


def check(model, compiled, make_args):
    """compiled(*args) equals eager under the float64 rule."""
    model64 = copy.deepcopy(model).double()
    with torch.no_grad():
        args = make_args()
        args64 = [a.double() if a.is_floating_point() else a for a in args]
        verdict = judge(compiled(*args), model(*args), model64(*args64))
    assert verdict.passed, verdict.message


def test_trace_shape_moves_opt_of_one_into_the_range():
    assert trace_shape(Input(min_shape=(1, 3), opt_shape=(1, 3), max_shape=(8, 3))) == (2, 3)
    assert trace_shape(Input(min_shape=(0, 3), opt_shape=(0, 3), max_shape=(1, 3))) == (1, 3)
    assert trace_shape(Input(min_shape=(4, 3), opt_shape=(4, 3), max_shape=(8, 3))) == (4, 3)
    assert trace_shape(Input(shape=(1, 3))) == (1, 3)  # static dims keep their size


def test_resnet18_batch_min_1_opt_1_max_8():
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval()
    spec = Input(min_shape=(1, 3, 224, 224), opt_shape=(1, 3, 224, 224),
                 max_shape=(8, 3, 224, 224))
    compiled = torch_trt_ref.compile(model, [spec], executor="reference")
    assert not compiled.compile_report.fallbacks
    for batch in (1, 3, 6, 8):
        check(model, compiled, lambda: [torch.randn(batch, 3, 224, 224)])


class FirstOutput(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids):
        return self.model(input_ids=input_ids)[0]


def test_default_attention_bert_sequence_min_1_opt_1_max_128():
    torch.manual_seed(0)
    config = BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=128, vocab_size=100, max_position_embeddings=128)
    assert config._attn_implementation in (None, "sdpa")  # the library default
    model = FirstOutput(BertModel(config)).eval()
    spec = Input(min_shape=(1, 1), opt_shape=(1, 1), max_shape=(1, 128), dtype=torch.int64,
                 high=100)
    compiled = torch_trt_ref.compile(model, [spec], min_block_size=1,
                                     require_full_compilation=True, executor="reference")
    for seq in (1, 17, 64, 128):
        ids = torch.randint(0, 100, (1, seq), generator=torch.Generator().manual_seed(seq))
        check(model, compiled, lambda: [ids])


class SmallOps(torch.nn.Module):
    """Elementwise, activation, reduction, slice and normalization ops."""

    def forward(self, x):
        y = torch.nn.functional.layer_norm(torch.relu(x) * 2 + 1, x.shape[-1:])
        return y[:, 1:].sum(-1) + x.mean(0)[1:].sum(-1)


@pytest.mark.parametrize("lo,opt,hi", [(1, 1, 2), (1, 2, 2), (0, 1, 3), (2, 2, 3)])
def test_small_ranges_compile_and_match_at_every_size(lo, opt, hi):
    model = SmallOps()
    spec = Input(min_shape=(lo, 5, 4), opt_shape=(opt, 5, 4), max_shape=(hi, 5, 4))
    compiled = torch_trt_ref.compile(model, [spec], min_block_size=1,
                                     require_full_compilation=True, executor="reference")
    for batch in range(max(lo, 1), hi + 1):  # (a zero-size batch has no float64 reference)
        check(model, compiled, lambda: [torch.randn(batch, 5, 4)])


def test_random_in_range_shapes():
    model = SmallOps()
    spec = Input(min_shape=(1, 2, 4), opt_shape=(1, 8, 4), max_shape=(9, 16, 4))
    compiled = torch_trt_ref.compile(model, [spec], min_block_size=1,
                                     require_full_compilation=True, executor="reference")
    gen = torch.Generator().manual_seed(0)
    for _ in range(4):
        batch, rows = (int(torch.randint(lo, hi + 1, (), generator=gen))
                       for lo, hi in ((1, 9), (2, 16)))
        check(model, compiled, lambda: [torch.randn(batch, rows, 4)])


class ForcesBatchOfFour(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("bias", torch.ones(4, 3))

    def forward(self, x):
        return x * 2 + self.bias  # the model line that fixes dim 0 to 4


def test_a_dim_the_model_forces_static_is_a_clear_error():
    spec = Input(min_shape=(2, 3), opt_shape=(4, 3), max_shape=(8, 3))  # eager runs at 4 only
    with pytest.raises(DynamicShapeError) as err:
        torch_trt_ref.compile(ForcesBatchOfFour(), [spec])
    message = str(err.value)
    assert "input 'x' dim 0" in message and "min=2, opt=4, max=8" in message
    assert "test_declared_ranges.py" in message and "x * 2 + self.bias" in message
    assert "size 4" in message


def test_a_dim_the_model_forces_static_runs_where_eager_runs_and_says_why():
    """Declared 1..8, the model runs in eager at 4 and (broadcasting) at 1 only: the compiled
    module runs at both and raises elsewhere, as eager does; the warning names the line."""
    model = ForcesBatchOfFour()
    spec = Input(min_shape=(1, 3), opt_shape=(4, 3), max_shape=(8, 3))
    with pytest.warns(UserWarning, match="raises in eager at declared sizes") as record:
        compiled = torch_trt_ref.compile(model, [spec])
    message = " ".join(str(w.message) for w in record)
    assert "input 'x' dim 0" in message and "x * 2 + self.bias" in message
    for batch in (1, 4):
        check(model, compiled, lambda: [torch.randn(batch, 3)])
    with pytest.raises(RuntimeError, match="raises in eager"):
        compiled(torch.randn(2, 3))


class BranchesOnBatch(torch.nn.Module):
    """Takes another path for a batch of one, as models that squeeze or skip a mask do."""

    def forward(self, x):
        if x.shape[0] > 1:
            return torch.softmax(x, dim=0) * 2
        return torch.tanh(x)


@pytest.mark.parametrize("hi", [8, 2])
def test_a_branch_on_a_declared_size_takes_eagers_path_at_every_size(hi):
    """The trace at batch 2 covers 2..hi only (guard s0 > 1); batch 1 must not run that
    graph, which disagrees with eager there, so batch 1 is compiled on its own. With hi=2
    the trace covers the single size 2 (export used to fail)."""
    spec = Input(min_shape=(1, 3), opt_shape=(1, 3), max_shape=(hi, 3))
    compiled = torch_trt_ref.compile(BranchesOnBatch().eval(), [spec], min_block_size=1)
    sizes = compiled.compile_report.size_branches
    assert [b["sizes"]["input 0 dim 0"] for b in sizes] == [[2, hi], [1, 1]]
    for batch in sorted({1, 2, hi}):
        check(BranchesOnBatch(), compiled, lambda: [torch.randn(batch, 3)])


class LogitsOnly(FirstOutput):
    def forward(self, input_ids):
        return self.model(input_ids=input_ids).logits


DECODERS = {
    "gpt2": lambda: GPT2LMHeadModel(GPT2Config(n_embd=32, n_layer=2, n_head=2, vocab_size=100,
                                               n_positions=64, use_cache=False)),
    "llama": lambda: LlamaForCausalLM(LlamaConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, vocab_size=100, max_position_embeddings=64, use_cache=False)),
}


@pytest.mark.parametrize("name", list(DECODERS))
def test_default_attention_decoder_sequence_min_1_opt_1(name):
    """transformers' sdpa attention branches on the query length (is_causal = q_length > 1),
    which gives the same attention for one query (Note [Sizes the trace does not cover])."""
    torch.manual_seed(0)
    model = LogitsOnly(DECODERS[name]()).eval()
    spec = Input(min_shape=(1, 1), opt_shape=(1, 1), max_shape=(1, 32), dtype=torch.int64,
                 high=100)
    compiled = torch_trt_ref.compile(model, [spec], executor="reference")
    assert not compiled.compile_report.fallbacks
    # traced for 2..32; one module, checked against eager at 1 (not split by size)
    assert compiled.compile_report.untraced_sizes == [{"input 0 dim 1": [1, 1]}]
    assert isinstance(compiled, torch.fx.GraphModule)
    for seq in (1, 2, 19, 32):
        ids = torch.randint(0, 100, (1, seq), generator=torch.Generator().manual_seed(seq))
        check(model, compiled, lambda: [ids])


class SelfAttention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.attention = torch.nn.MultiheadAttention(8, 2, batch_first=True)

    def forward(self, x):
        return self.attention(x, x, x, need_weights=False)[0]


def test_a_guard_export_keeps_out_of_its_ranges_splits_too():
    """nn.MultiheadAttention (torchvision ViT) guards Ne(batch, 1) under size-oblivious
    tracing without narrowing export's range_constraints; a 1..2 range was built for batch
    2 only and rejected batch 1."""
    torch.manual_seed(0)
    model = SelfAttention().eval()
    spec = Input(min_shape=(1, 4, 8), opt_shape=(1, 4, 8), max_shape=(2, 4, 8))
    compiled = torch_trt_ref.compile(model, [spec], min_block_size=1)
    for batch in (1, 2):
        check(model, compiled, lambda: [torch.randn(batch, 4, 8)])


class LinearBranchesOnBatch(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(3, 3)

    def forward(self, x):
        y = self.linear(x)
        return torch.softmax(y, dim=0) if x.shape[0] > 1 else torch.tanh(y)


def test_a_module_compiled_per_size_refits_every_branch():
    torch.manual_seed(0)
    spec = Input(min_shape=(1, 3), opt_shape=(1, 3), max_shape=(4, 3))
    compiled = torch_trt_ref.compile(LinearBranchesOnBatch().eval(), [spec], min_block_size=1)
    assert len(compiled.compile_report.size_branches) == 2
    new = LinearBranchesOnBatch().eval()
    torch_trt_ref.refit(compiled, new)
    for batch in (1, 3):
        check(new, compiled, lambda: [torch.randn(batch, 3)])


def test_a_module_compiled_per_size_saves_and_loads(tmp_path):
    """torch_trt_ref.save / load and torch.save / torch.load keep every branch and the
    choice by size; each loaded module equals eager at every size (float64 rule)."""
    torch.manual_seed(0)
    model = LinearBranchesOnBatch().eval()
    spec = Input(min_shape=(1, 3), opt_shape=(1, 3), max_shape=(4, 3))
    compiled = torch_trt_ref.compile(model, [spec], min_block_size=1)
    torch_trt_ref.save(compiled, tmp_path / "split.ttrt")
    torch.save(compiled, tmp_path / "split.pt")
    for loaded in (torch_trt_ref.load(tmp_path / "split.ttrt"),
                   torch.load(tmp_path / "split.pt", weights_only=False)):
        assert len(loaded.compile_report.size_branches) == 2
        for batch in (1, 2, 4):
            check(model, loaded, lambda: [torch.randn(batch, 3)])
