"""Reference semantics of TensorRT's fused attention and LLM layers (ATTENTION_INPUT,
ATTENTION_OUTPUT, ROTARY_EMBEDDING, KV_CACHE_UPDATE, RAGGED_SOFTMAX) and the clear errors
of the kinds that cannot run on one device without a plugin (PLUGIN*, DIST_COLLECTIVE)."""

from __future__ import annotations
