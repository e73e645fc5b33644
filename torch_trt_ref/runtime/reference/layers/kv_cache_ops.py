"""Reference semantics of TensorRT's KV-cache update layer: an in-place write into the
cache input, whose memory the output shares."""

from __future__ import annotations

from ....kv_cache_op import write_kv
from ..registry import reference_layer


@reference_layer("KV_CACHE_UPDATE", "IKVCacheUpdateLayer", attrs=("cache_mode",))
def kv_cache_update(inputs, cache_mode="LINEAR"):
    """output[b, :, write_indices[b] + s, :] = update[b, :, s, :] (LINEAR, padded BHND
    updates); the output *is* the cache input, written in place, as in TensorRT ("shares
    the same device memory address with the cache input").
    https://docs.nvidia.com/deeplearning/tensorrt/latest/_static/operators/KVCacheUpdate.html"""
    cache, update, write_index = inputs[0], inputs[1], inputs[2]
    if cache_mode not in (None, "LINEAR"):
        raise NotImplementedError(f"KV-cache mode {cache_mode}")
    if int((write_index.long() + update.shape[2]).max()) > cache.shape[2]:
        raise IndexError(f"KV-cache update writes past the cache: positions from "
                         f"{write_index.tolist()} + {update.shape[2]} > {cache.shape[2]}")
    return (write_kv(cache, update, write_index),)
