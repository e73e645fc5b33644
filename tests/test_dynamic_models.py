"""BERT, GPT-2 and Llama (grouped-query attention, rotary embeddings) in their default
configuration (sdpa attention) with a dynamic sequence length: one TensorRT engine built for
input_ids of shape (1, 4..32) must match eager PyTorch at several lengths inside the range
(the SymInt path: sym_size -> shape arithmetic -> view/expand/arange/slice/full)."""

import pytest
import torch
from transformers import (
    BertConfig,
    BertModel,
    GPT2Config,
    GPT2LMHeadModel,
    LlamaConfig,
    LlamaForCausalLM,
)

import torch_trt_ref

VOCAB = 100
SPEC = torch_trt_ref.Input(min_shape=(1, 4), opt_shape=(1, 16), max_shape=(1, 32),
                           dtype=torch.int64)


class FirstOutput(torch.nn.Module):
    """Calls a Hugging Face model on input_ids only and returns its first output tensor."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, input_ids):
        return self.model(input_ids=input_ids, use_cache=False)[0]


def bert() -> torch.nn.Module:
    config = BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=128, vocab_size=VOCAB, max_position_embeddings=64)
    return FirstOutput(BertModel(config))


def gpt2() -> torch.nn.Module:
    config = GPT2Config(n_embd=64, n_layer=2, n_head=2, vocab_size=VOCAB, n_positions=64,
                        bos_token_id=0, eos_token_id=0, use_cache=False)
    return FirstOutput(GPT2LMHeadModel(config))


def llama() -> torch.nn.Module:
    config = LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, vocab_size=VOCAB,
                         max_position_embeddings=64, use_cache=False)
    return FirstOutput(LlamaForCausalLM(config))


@pytest.fixture(scope="module", params=[bert, gpt2, llama], ids=["bert", "gpt2", "llama"])
def model_and_compiled(request):
    torch.manual_seed(0)
    model = request.param().eval()
    compiled = torch_trt_ref.compile(model, [SPEC], min_block_size=1,
                                     require_full_compilation=True, executor="reference")
    return model, compiled


def test_whole_model_is_one_dynamic_engine(model_and_compiled):
    _, compiled = model_and_compiled
    report = compiled.compile_report
    assert len(report.engines) == 1 and not report.fallbacks, report.fallbacks
    converters = report.engines[0].converters
    assert "aten.sym_size.int" in converters  # the sequence length is symbolic
    assert "aten.view.default" in converters
    # nodes with SymInt arguments (arange(seq)) are lowered node by node too
    assert report.lowering == "node by node", report.lowering


@pytest.mark.parametrize("seq", [4, 8, 32])
def test_matches_eager_across_sequence_lengths(model_and_compiled, seq):
    model, compiled = model_and_compiled
    ids = torch.randint(0, VOCAB, (1, seq), generator=torch.Generator().manual_seed(seq))
    with torch.no_grad():
        expected = model(ids)
        actual = compiled(ids)
    assert actual.shape == expected.shape == (1, seq, expected.shape[-1])
    torch.testing.assert_close(actual, expected, atol=1e-4, rtol=1e-4)
