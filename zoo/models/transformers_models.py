"""Hugging Face transformers models built from configs at their published sizes, with random
weights (nothing is downloaded); small 2-layer variants for CI."""

from __future__ import annotations

import functools

import torch

from torch_trt_ref import Input

from ..entry import ZooEntry, seeded, tolerances

SEQ = 32
ATTENTION = "eager"  # exports with torch.export in transformers 5; see docs/zoo.md


def _config(cls_name: str, **fields):
    import transformers

    config = getattr(transformers, cls_name)(**fields)
    config._attn_implementation = ATTENTION
    config.use_cache = False
    return config


def _build(model_cls: str, config_cls: str, **fields) -> torch.nn.Module:
    import transformers

    return getattr(transformers, model_cls)(_config(config_cls, **fields))


def _tokens(vocab: int, seq: int = SEQ):
    def inputs():
        return (torch.randint(0, vocab, (1, seq), generator=seeded()),), {}
    return inputs


def _dynamic_tokens(vocab: int):
    return (Input(min_shape=(1, 8), opt_shape=(1, SEQ), max_shape=(1, 128), dtype=torch.int64,
                  high=vocab),), {}


class Seq2Seq(torch.nn.Module):
    """T5 forward with explicit ``decoder_input_ids`` (encoder and decoder in one graph);
    returns the logits only."""

    def __init__(self):
        super().__init__()
        self.model = _build("T5ForConditionalGeneration", "T5Config", **T5_SMALL)

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
BERT_2LAYER = dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
                   intermediate_size=512, vocab_size=30522)
GPT2_124M = dict(n_embd=768, n_layer=12, n_head=12, vocab_size=50257, n_positions=1024)
GPT2_2LAYER = dict(n_embd=128, n_layer=2, n_head=2, vocab_size=50257, n_positions=1024)
T5_SMALL = dict(d_model=512, d_kv=64, d_ff=2048, num_layers=6, num_heads=8, vocab_size=32128)
VIT_BASE = dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                intermediate_size=3072, image_size=224, patch_size=16)
WHISPER_TINY = dict(d_model=384, encoder_layers=4, decoder_layers=4, encoder_attention_heads=6,
                    decoder_attention_heads=6, encoder_ffn_dim=1536, decoder_ffn_dim=1536,
                    num_mel_bins=80, vocab_size=51865)
LLAMA_100M = dict(hidden_size=768, intermediate_size=2048, num_hidden_layers=8,
                  num_attention_heads=12, num_key_value_heads=4, vocab_size=32000,
                  max_position_embeddings=2048, tie_word_embeddings=False)


def _t5_inputs():
    g = seeded()
    return (torch.randint(0, 32128, (1, SEQ), generator=g),
            torch.randint(0, 32128, (1, SEQ // 2), generator=g)), {}


def _pixels():
    return (torch.randn(1, 3, 224, 224, generator=seeded()),), {}


def _mel():
    return (torch.randn(1, 80, 3000, generator=seeded()),), {}


def _hf(name, model_cls, config_cls, fields, vocab, description, tags=(), **tol):
    factory = functools.partial(_build, model_cls, config_cls, **fields)
    factory.__name__ = name
    return ZooEntry(name, factory, _tokens(vocab), _dynamic_tokens(vocab), tolerances(**tol),
                    ("transformers", *tags), description)


ENTRIES = [
    _hf("bert_base", "BertModel", "BertConfig", BERT_BASE, 30522,
        "BERT-base BertModel (110M params), 32 tokens"),
    _hf("bert_2layer", "BertModel", "BertConfig", BERT_2LAYER, 30522,
        "BertModel, 2 layers, hidden 128 (CI variant)", ("quick",)),
    _hf("gpt2", "GPT2LMHeadModel", "GPT2Config", GPT2_124M, 50257,
        "GPT-2 124M GPT2LMHeadModel, 32 tokens, use_cache=False"),
    _hf("gpt2_2layer", "GPT2LMHeadModel", "GPT2Config", GPT2_2LAYER, 50257,
        "GPT2LMHeadModel, 2 layers, hidden 128 (CI variant)", ("quick",)),
    _hf("llama_100m", "LlamaForCausalLM", "LlamaConfig", LLAMA_100M, 32000,
        "Llama-style decoder, 8 layers, hidden 768, GQA 12/4 heads (~106M params)"),
    ZooEntry("t5_small", Seq2Seq, _t5_inputs, None, tolerances(), ("transformers",),
             "T5-small T5ForConditionalGeneration, encoder 32 + decoder 16 tokens -> logits"),
    ZooEntry("vit_base", functools.partial(_build, "ViTModel", "ViTConfig", **VIT_BASE),
             _pixels, None, tolerances(), ("transformers", "vision"),
             "ViT-base ViTModel (86M params) on one 224x224 image"),
    ZooEntry("whisper_tiny_encoder", WhisperEncoder, _mel, None, tolerances(),
             ("transformers", "audio"), "Whisper-tiny encoder (8M params), 80 x 3000 mel"),
]
