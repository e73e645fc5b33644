"""``torch_trt_ref::kv_cache_update`` (the static KV cache write, DESIGN D15) onto
TensorRT's KV-cache update layer: one token and a few tokens written mid-cache, the update's
sequence length dynamic (prefill), batch rows at their own positions. The compiled module
writes the cache input in place (the float64 reference sees the same values: the write is
idempotent)."""

import torch

from torch_trt_ref.kv_cache_op import KV_CACHE_UPDATE

from ..case import Case, T

CASES = [
    Case(KV_CACHE_UPDATE, (T((1, 2, 8, 4), dynamic=()), T((1, 2, 1, 4), dynamic=()),
                           T((1,), dtype=torch.int64, values=[5])), name="decode"),
    Case(KV_CACHE_UPDATE, (T((1, 2, 8, 4), dynamic=()), T((1, 2, 3, 4), dynamic=(2,)),
                           T((1,), dtype=torch.int64, values=[2])), name="prefill"),
    Case(KV_CACHE_UPDATE, (T((2, 3, 6, 2), dynamic=()), T((2, 3, 2, 2), dynamic=()),
                           T((2,), dtype=torch.int32, values=[0, 4])), name="batch"),
]
