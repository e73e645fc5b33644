"""Converter of ``torch_trt_ref::kv_cache_update`` (torch_trt_ref/kv_cache_op.py) onto
TensorRT's IKVCacheUpdateLayer (LINEAR mode, padded [B, H, S, D] updates). TensorRT asks
that the cache be a network input with a static sequence length and the layer's output a
network output sharing its memory: the validator checks what the graph can say."""

from __future__ import annotations

import torch

from ..._trt import trt
from ...kv_cache_op import KV_CACHE_UPDATE
from .. import helpers
from ..blocks.nodes import FLOAT_DTYPES, fake, node_args
from ..registry import converter


def _kv_update_ok(node, settings):
    args = node_args(node)
    cache, update, index = args["cache"], fake(args["update"]), fake(args["write_index"])
    if not (isinstance(cache, torch.fx.Node) and cache.op == "placeholder"):
        return ("TensorRT's KV-cache update layer writes a network input (the cache) in "
                f"place; here the cache is {_describe(cache)}")
    if not any(u.op == "output" for u in node.users):
        return "the updated cache must be a network output (it shares the input's memory)"
    if not isinstance(fake(cache).shape[2], int):
        return "the cache's sequence length (dim 2) must be static"
    if fake(cache).dtype not in FLOAT_DTYPES or update.dtype != fake(cache).dtype:
        return f"cache and update must be one of {FLOAT_DTYPES}, the same dtype"
    if index.dtype not in (torch.int32, torch.int64) or index.dim() != 1:
        return "write_index must be a 1-d int32/int64 tensor (one position per batch row)"
    return None


def _describe(value) -> str:
    if isinstance(value, torch.fx.Node):
        return f"{value.op} {value.target} of {[str(a) for a in value.args]}"
    return repr(value)


@converter(KV_CACHE_UPDATE, validator=_kv_update_ok, dynamic=True)
def kv_cache_update(ctx, cache, update, write_index):
    # TensorRT-RTX's builder takes int32 write indices only ("Write indices must be of type
    # int32, but got i64"), though the operator page lists int64 too
    index = helpers.cast(ctx, helpers.itensor(ctx, write_index), torch.int32)
    layer = ctx.net.add_kv_cache_update(cache, update, index, trt.KVCacheMode.LINEAR)
    return layer.get_output(0)
