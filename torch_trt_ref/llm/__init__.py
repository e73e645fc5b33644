"""Decoder LLMs as they are deployed (DESIGN D15): ``compile`` a transformers
``*ForCausalLM`` into one engine over a static KV cache written in place, with decode and
prefill optimization profiles; ``generate`` tokens with it (docs/llm.md)."""

from .compiled import CacheReport, CompiledDecoder, compile  # noqa: F401
from .generate import generate  # noqa: F401
from .graphs import DecodeGraph  # noqa: F401

__all__ = ["compile", "generate", "CompiledDecoder", "CacheReport", "DecodeGraph"]
