"""Hugging Face transformers models built from configs at their published sizes, with random
weights (nothing is downloaded), in the library's default configuration (attention as
transformers picks it: sdpa); small 2-layer variants for CI and eager-attention variants."""

from __future__ import annotations

import functools

import torch

from torch_trt_ref import Input

from ..entry import ZooEntry, seeded, tolerances

SEQ = 32
# Decoder-only models return their KV cache (a DynamicCache, not a pytree type torch.export
# can output) unless use_cache=False; encoders and the seq2seq wrapper (which returns the
# logits only) keep the default.
NO_CACHE = {"use_cache": False}
EAGER_TAGS = ("variant", "eager_attention")


def _config(cls_name: str, attn_implementation: str | None = None, **fields):
    import transformers

    return getattr(transformers, cls_name)(attn_implementation=attn_implementation, **fields)


def _build(model_cls: str, config_cls: str, **fields) -> torch.nn.Module:
    import transformers

    return getattr(transformers, model_cls)(_config(config_cls, **fields))


def _tokens(vocab: int, seq: int = SEQ):
    def inputs():
        return (torch.randint(0, vocab, (1, seq), generator=seeded()),), {}
    return inputs


def _token_spec(vocab: int, min_len: int = 8, max_len: int = 128, opt: int = SEQ) -> Input:
    return Input(min_shape=(1, min_len), opt_shape=(1, opt), max_shape=(1, max_len),
                 dtype=torch.int64, high=vocab)


def _dynamic_tokens(vocab: int):
    return (_token_spec(vocab),), {}


class Seq2Seq(torch.nn.Module):
    """An encoder-decoder's forward with explicit ``decoder_input_ids`` (encoder and decoder
    in one graph); returns the logits only."""

    def __init__(self, model_cls: str, config_cls: str, fields: dict):
        super().__init__()
        self.model = _build(model_cls, config_cls, **fields)

    def forward(self, input_ids: torch.Tensor, decoder_input_ids: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=input_ids, decoder_input_ids=decoder_input_ids).logits


class WhisperEncoder(torch.nn.Module):
    """The encoder of Whisper-tiny on 80 mel bins x 3000 frames (30 s, the fixed size its
    positional embedding expects)."""

    def __init__(self):
        super().__init__()
        import transformers

        self.encoder = transformers.WhisperModel(_config("WhisperConfig", **WHISPER_TINY)).encoder

    def forward(self, input_features: torch.Tensor) -> torch.Tensor:
        return self.encoder(input_features).last_hidden_state


BERT_BASE = dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                 intermediate_size=3072, vocab_size=30522)
# The 4-layer BERT of issue 27's GPU latency table: hidden 512, 128 tokens; the vocabulary
# is cut to 1024 so its saved programs fit a transfer to a GPU machine (an embedding
# lookup costs the same at any vocabulary size).
BERT_4LAYER = dict(hidden_size=512, num_hidden_layers=4, num_attention_heads=8,
                   intermediate_size=2048, vocab_size=1024)
BERT_2LAYER = dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
                   intermediate_size=512, vocab_size=30522)
GPT2_124M = dict(n_embd=768, n_layer=12, n_head=12, vocab_size=50257, n_positions=1024,
                 **NO_CACHE)
GPT2_2LAYER = dict(n_embd=128, n_layer=2, n_head=2, vocab_size=50257, n_positions=1024,
                   **NO_CACHE)
LLAMA_100M = dict(hidden_size=768, intermediate_size=2048, num_hidden_layers=8,
                  num_attention_heads=12, num_key_value_heads=4, vocab_size=32000,
                  max_position_embeddings=2048, tie_word_embeddings=False, **NO_CACHE)
# Grouped-query attention (4 query heads share 2 KV heads) and rotary embeddings; every
# other field is the config class's default. Qwen2 differs from Llama by the biases of its
# q/k/v projections; its vocabulary is cut from 151936 to 32000 to keep the CI variant small.
# (Mistral at this size would be Llama: its 4096-token sliding window never applies.)
LLAMA_2LAYER = dict(hidden_size=128, intermediate_size=512, num_hidden_layers=2,
                    num_attention_heads=4, num_key_value_heads=2, vocab_size=32000, **NO_CACHE)
QWEN2_2LAYER = dict(LLAMA_2LAYER)
T5_SMALL = dict(d_model=512, d_kv=64, d_ff=2048, num_layers=6, num_heads=8, vocab_size=32128)
T5_2LAYER = dict(d_model=128, d_kv=64, d_ff=512, num_layers=2, num_heads=2, vocab_size=32128)
BART_BASE = dict(d_model=768, encoder_layers=6, decoder_layers=6, encoder_attention_heads=12,
                 decoder_attention_heads=12, encoder_ffn_dim=3072, decoder_ffn_dim=3072,
                 vocab_size=50265)
VIT_BASE = dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                intermediate_size=3072, image_size=224, patch_size=16)
WHISPER_TINY = dict(d_model=384, encoder_layers=4, decoder_layers=4, encoder_attention_heads=6,
                    decoder_attention_heads=6, encoder_ffn_dim=1536, decoder_ffn_dim=1536,
                    num_mel_bins=80, vocab_size=51865)


def _seq2seq_inputs(vocab: int):
    def inputs():
        g = seeded()
        return (torch.randint(0, vocab, (1, SEQ), generator=g),
                torch.randint(0, vocab, (1, SEQ // 2), generator=g)), {}
    return inputs


def _dynamic_seq2seq(vocab: int):
    return (_token_spec(vocab), _token_spec(vocab, 4, 64, SEQ // 2)), {}


def _pixels():
    return (torch.randn(1, 3, 224, 224, generator=seeded()),), {}


def _mel():
    return (torch.randn(1, 80, 3000, generator=seeded()),), {}


def _named(factory, name: str):
    factory.__name__ = name
    return factory


def _hf(name, model_cls, config_cls, fields, description, tags=(), **tol):
    factory = _named(functools.partial(_build, model_cls, config_cls, **fields), name)
    vocab = fields["vocab_size"]
    return ZooEntry(name, factory, _tokens(vocab), _dynamic_tokens(vocab), tolerances(**tol),
                    ("transformers", *tags), description)


def _seq2seq(name, model_cls, config_cls, fields, description, tags=(), **tol):
    factory = _named(functools.partial(Seq2Seq, model_cls, config_cls, fields), name)
    vocab = fields["vocab_size"]
    return ZooEntry(name, factory, _seq2seq_inputs(vocab), _dynamic_seq2seq(vocab),
                    tolerances(**tol), ("transformers", *tags), description)


EAGER = {"attn_implementation": "eager"}

ENTRIES = [
    _hf("bert_base", "BertModel", "BertConfig", BERT_BASE,
        "BERT-base BertModel (110M params), 32 tokens"),
    ZooEntry("bert_base_128", _named(functools.partial(_build, "BertModel", "BertConfig",
                                                        **BERT_BASE), "bert_base_128"),
             _tokens(BERT_BASE["vocab_size"], 128), None, tolerances(), ("transformers",),
             "BERT-base BertModel (110M params), 128 tokens (GPU latency)"),
    ZooEntry("bert_4layer", _named(functools.partial(_build, "BertModel", "BertConfig",
                                                      **BERT_4LAYER), "bert_4layer"),
             _tokens(BERT_4LAYER["vocab_size"], 128), None, tolerances(), ("transformers",),
             "BertModel, 4 layers, hidden 512, 8 heads, 128 tokens, vocab 1024 (GPU latency)"),
    _hf("bert_2layer", "BertModel", "BertConfig", BERT_2LAYER,
        "BertModel, 2 layers, hidden 128 (CI variant)", ("quick",)),
    _hf("bert_2layer_eager", "BertModel", "BertConfig", {**BERT_2LAYER, **EAGER},
        "bert_2layer with attn_implementation='eager' (variant)", EAGER_TAGS),
    _hf("gpt2", "GPT2LMHeadModel", "GPT2Config", GPT2_124M,
        "GPT-2 124M GPT2LMHeadModel, 32 tokens, use_cache=False"),
    _hf("gpt2_2layer", "GPT2LMHeadModel", "GPT2Config", GPT2_2LAYER,
        "GPT2LMHeadModel, 2 layers, hidden 128 (CI variant)", ("quick",)),
    _hf("gpt2_2layer_eager", "GPT2LMHeadModel", "GPT2Config", {**GPT2_2LAYER, **EAGER},
        "gpt2_2layer with attn_implementation='eager' (variant)", EAGER_TAGS),
    _hf("llama_100m", "LlamaForCausalLM", "LlamaConfig", LLAMA_100M,
        "Llama-style decoder, 8 layers, hidden 768, GQA 12/4 heads (~106M params)"),
    _hf("llama_2layer", "LlamaForCausalLM", "LlamaConfig", LLAMA_2LAYER,
        "LlamaForCausalLM, 2 layers, hidden 128, GQA 4/2 heads, rotary (CI variant)",
        ("quick",)),
    _hf("qwen2_2layer", "Qwen2ForCausalLM", "Qwen2Config", QWEN2_2LAYER,
        "Qwen2ForCausalLM, 2 layers, hidden 128, GQA 4/2 heads, q/k/v bias, vocab 32000 "
        "(CI variant)", ("quick",)),
    _seq2seq("t5_small", "T5ForConditionalGeneration", "T5Config", T5_SMALL,
             "T5-small T5ForConditionalGeneration, encoder 32 + decoder 16 tokens -> logits"),
    _seq2seq("t5_2layer", "T5ForConditionalGeneration", "T5Config", T5_2LAYER,
             "T5ForConditionalGeneration, 2+2 layers, d_model 128, encoder 32 + decoder 16 "
             "tokens -> logits (CI variant)", ("quick",)),
    _seq2seq("bart_base", "BartForConditionalGeneration", "BartConfig", BART_BASE,
             "BART-base BartForConditionalGeneration (140M params), encoder 32 + decoder 16 "
             "tokens -> logits"),
    ZooEntry("vit_base", _named(functools.partial(_build, "ViTModel", "ViTConfig", **VIT_BASE),
                                "vit_base"),
             _pixels, None, tolerances(), ("transformers", "vision"),
             "ViT-base ViTModel (86M params) on one 224x224 image"),
    ZooEntry("whisper_tiny_encoder", WhisperEncoder, _mel, None, tolerances(),
             ("transformers", "audio"), "Whisper-tiny encoder (8M params), 80 x 3000 mel"),
]
