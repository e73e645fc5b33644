"""Small decoder configurations by name for ``torch-trt-ref llm run`` (random weights, the
library's default attention; nothing is downloaded)."""

from __future__ import annotations

import torch
import transformers as tf


def _common(layers: int, hidden: int, vocab: int) -> dict:
    return dict(num_hidden_layers=layers, hidden_size=hidden, intermediate_size=2 * hidden,
                num_attention_heads=4, num_key_value_heads=2, head_dim=hidden // 4,
                vocab_size=vocab, max_position_embeddings=4096)


MODELS = {
    "gpt2": lambda n, h, v: tf.GPT2LMHeadModel(tf.GPT2Config(
        n_layer=n, n_embd=h, n_head=4, vocab_size=v, n_positions=4096)),
    "llama": lambda n, h, v: tf.LlamaForCausalLM(tf.LlamaConfig(**_common(n, h, v))),
    "qwen3": lambda n, h, v: tf.Qwen3ForCausalLM(tf.Qwen3Config(**_common(n, h, v))),
    "mistral": lambda n, h, v: tf.MistralForCausalLM(tf.MistralConfig(
        **_common(n, h, v), sliding_window=64)),
    "gemma3": lambda n, h, v: tf.Gemma3ForCausalLM(tf.Gemma3TextConfig(
        **_common(n, h, v), sliding_window=64)),
}


def build(name: str, layers: int = 2, hidden: int = 64, vocab: int = 1000,
          seed: int = 0) -> torch.nn.Module:
    """The model ``name`` (one of ``MODELS``) with random weights, in eval mode."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; choose one of {sorted(MODELS)}")
    torch.manual_seed(seed)
    return MODELS[name](layers, hidden, vocab).eval()
