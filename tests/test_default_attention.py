"""Models as users build them: transformers models in their default configuration (attention
as transformers picks it, sdpa) compile with default settings and pass the float64 rule
(``torch_trt_ref.accuracy.judge``). The regression test of a000fb3: before it, every sdpa
model compiled to wrong results (GPT-2 2-layer: max error 0.25) while eager-attention
models were right."""

from __future__ import annotations

import copy
import functools

import pytest
import torch
import transformers

import torch_trt_ref
from torch_trt_ref.accuracy import judge, tensors, to_float64

SEQ = 32
LOW_PRECISION = {"fp16": torch.float16, "bf16": torch.bfloat16}


def gpt2_2layer() -> torch.nn.Module:
    # use_cache=False: the default output holds a DynamicCache, which torch.export rejects
    config = transformers.GPT2Config(n_layer=2, n_embd=128, n_head=2, use_cache=False)
    return transformers.GPT2LMHeadModel(config)


def bert_2layer() -> torch.nn.Module:
    config = transformers.BertConfig(hidden_size=128, num_hidden_layers=2,
                                     num_attention_heads=2, intermediate_size=512)
    return transformers.BertModel(config)


# Built here, not taken from the zoo, so the test does not depend on the zoo's entries
# staying in the default configuration; test_zoo_entries_are_these_models checks they do.
OWN = {"gpt2_2layer": gpt2_2layer, "bert_2layer": bert_2layer}
# The zoo's other quick transformers entries (see zoo/registry.py QUICK).
ZOO_QUICK = ["llama_2layer", "qwen2_2layer", "t5_2layer"]


@functools.cache
def case(name: str):
    """(model, args, eager fp32 output, eager float64 output) of a model, built once."""
    torch.manual_seed(0)
    if name in OWN:
        model = OWN[name]().eval()
        vocab = model.config.vocab_size
        args = (torch.randint(0, vocab, (1, SEQ), generator=torch.Generator().manual_seed(0)),)
    else:
        from zoo.registry import get

        entry = get(name)
        model = entry.factory()
        args, kwargs = entry.inputs()
        assert not kwargs
    with torch.no_grad():
        eager = model(*args)
        eager64 = copy.deepcopy(model).double()(*to_float64(args))
    return model, args, eager, eager64


def attention_of(model: torch.nn.Module) -> str:
    return next(m.config for m in model.modules() if hasattr(m, "config"))._attn_implementation


@pytest.mark.parametrize("name", [*OWN, *ZOO_QUICK])
def test_default_attention_fp32_matches_float64(name):
    model, args, eager, eager64 = case(name)
    assert attention_of(model) == "sdpa"
    compiled = torch_trt_ref.compile(model, args)
    with torch.no_grad():
        out = compiled(*args)
    verdict = judge(out, eager, eager64)
    assert verdict.passed, f"{name} fp32: {verdict.message}"


@pytest.mark.parametrize("precision", sorted(LOW_PRECISION))
@pytest.mark.parametrize("name", list(OWN))
def test_default_attention_low_precision_matches_float64(name, precision):
    """The compiled module takes and returns the model's fp32 tensors, computing in the
    precision; its outputs hold that precision's values (the final cast back to fp32 is
    exact), so they are compared in eager's dtype with eager run in that precision."""
    dtype = LOW_PRECISION[precision]
    model, args, _, eager64 = case(name)
    compiled = torch_trt_ref.compile(model, args, precision=precision)
    with torch.no_grad():
        out = tensors(compiled(*args))
        eager = copy.deepcopy(model).to(dtype)(*args)
    assert all(t.dtype == torch.float32 for t in out)
    low = [t.to(dtype) for t in out]
    assert all(torch.equal(t, l.float()) for t, l in zip(out, low)), "not in the precision"
    verdict = judge(low, tensors(eager), tensors(eager64))
    assert verdict.passed, f"{name} {precision}: {verdict.message}"


def test_zoo_entries_are_these_models():
    """The zoo's gpt2_2layer and bert_2layer are the models above (same config, same
    weights), so the zoo's quick sweep measures the models this test judges."""
    from zoo.registry import get

    for name, build in OWN.items():
        mine, _, _, _ = case(name)
        zoo_model = get(name).factory()
        assert zoo_model.config.to_dict() == mine.config.to_dict(), name
        for (k, a), (_, b) in zip(mine.state_dict().items(), zoo_model.state_dict().items()):
            assert torch.equal(a, b), f"{name}: {k}"
