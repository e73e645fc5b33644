"""``torch_trt_ref::kv_cache_update(cache, update, write_index)``: the static KV cache write
of one attention layer (DESIGN D15), as TensorRT's IKVCacheUpdateLayer defines it:
``out[b, :, write_index[b] + s, :] = update[b, :, s, :]``, every other entry of ``cache``
kept. In a graph it is functional (a new tensor); converted, it becomes the KV-cache update
layer whose output shares the cache input's memory, so the engine writes the caller's
cache in place (the reference executor does too: runtime/reference/layers/attention_ops.py)."""

from __future__ import annotations

import torch


@torch.library.custom_op("torch_trt_ref::kv_cache_update", mutates_args=())
def kv_cache_update(cache: torch.Tensor, update: torch.Tensor,
                    write_index: torch.Tensor) -> torch.Tensor:
    """``cache`` [B, H, S_max, D] with ``update`` [B, H, S, D] written at sequence
    positions ``write_index[b] .. write_index[b] + S - 1`` ([B] int32/int64)."""
    return write_kv(cache.clone(), update, write_index)


@kv_cache_update.register_fake
def _(cache, update, write_index):
    return torch.empty_like(cache)


def write_kv(cache: torch.Tensor, update: torch.Tensor,
             write_index: torch.Tensor) -> torch.Tensor:
    """Write ``update`` into ``cache`` in place (the layer's semantics); returns ``cache``."""
    b, h, s, d = update.shape
    rows = write_index.reshape(b, 1, 1, 1).long() + torch.arange(s, device=cache.device
                                                                ).reshape(1, 1, s, 1)
    return cache.scatter_(2, rows.expand(b, h, s, d), update.to(cache.dtype))


KV_CACHE_UPDATE = torch.ops.torch_trt_ref.kv_cache_update.default
