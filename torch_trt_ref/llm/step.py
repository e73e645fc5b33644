"""The step function of a transformers decoder over a static KV cache (DESIGN D15):
``DecoderStep(model)(input_ids [B, T], position [1], k0, v0, k1, v1, ...)`` runs T tokens of
each of B sequences at positions ``position .. position + T - 1`` and returns the last
tokens' logits and the updated caches. Every layer's K/V are written with
``torch_trt_ref::kv_cache_update``, which the compiled engine performs in place on the
caller's buffers; the attention masks (causal, and the sliding window of sliding layers) are
built from the positions, so one graph serves prefill (T tokens) and decode (1 token)."""

from __future__ import annotations

import torch
from transformers.cache_utils import Cache, CacheLayerMixin

from ..kv_cache_op import kv_cache_update


class _StepLayer(CacheLayerMixin):
    """One layer's cache for one step: the caller's K/V buffers, written at ``position``."""

    is_compileable = True
    is_sliding = False

    def __init__(self, keys: torch.Tensor, values: torch.Tensor, position: torch.Tensor):
        super().__init__()
        self.keys, self.values, self.position = keys, values, position
        self.is_initialized = True

    def lazy_initialization(self, key_states, value_states) -> None:
        pass

    def update(self, key_states, value_states, *args, **kwargs):
        self.keys = kv_cache_update(self.keys, key_states, self.position)
        self.values = kv_cache_update(self.values, value_states, self.position)
        return self.keys, self.values

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        return self.keys.shape[2], 0

    def get_seq_length(self) -> int:
        raise NotImplementedError("the step passes position_ids; the cache length is an input")

    def get_max_length(self) -> int:
        return self.keys.shape[2]


def cache_shapes(model: torch.nn.Module) -> list[tuple[int, ...]]:
    """[B=1, kv heads, 1, head dim] of every layer's K and V (k0, v0, k1, ...), read from one
    eager token through the model's own DynamicCache (so GQA, per-layer head dims and any
    config spelling are the model's)."""
    with torch.no_grad():
        out = model(input_ids=torch.zeros(1, 1, dtype=torch.long), use_cache=True)
    shapes = []
    for layer in out.past_key_values.layers:
        shapes += [tuple(layer.keys.shape), tuple(layer.values.shape)]
    return shapes


def attention_masks(config, positions: torch.Tensor, length: int) -> dict | torch.Tensor:
    """Boolean [1, 1, T, length] masks (True: attend) for queries at ``positions``: causal
    (key index <= query position), and for sliding layers also within the window (key index
    > position - window), as transformers' ``sliding_window_overlay``. A dict by layer type
    for models whose config lists ``layer_types``, else the causal mask."""
    keys = torch.arange(length, device=positions.device)
    causal = keys[None, :] <= positions[:, None]
    masks = {"full_attention": causal[None, None]}
    window = getattr(config, "sliding_window", None)
    if window:
        masks["sliding_attention"] = (causal & (keys[None, :] > positions[:, None] - window)
                                      )[None, None]
    if getattr(config, "layer_types", None):
        return masks
    if window and getattr(config, "use_sliding_window", True) is not False and \
            "sliding_attention" in masks:
        return masks["sliding_attention"]
    return masks["full_attention"]


class DecoderStep(torch.nn.Module):
    """One decoding step of ``model`` (a transformers ``*ForCausalLM``) over a static cache."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model
        self.config = model.config.get_text_config(decoder=True)

    def run(self, input_ids: torch.Tensor, position: torch.Tensor, *caches: torch.Tensor):
        length, batch = caches[0].shape[2], input_ids.shape[0]
        positions = position + torch.arange(input_ids.shape[1], device=input_ids.device)
        starts = position.expand(batch)  # equal lengths: one write position for all
        cache = Cache(layers=[_StepLayer(caches[i], caches[i + 1], starts)
                              for i in range(0, len(caches), 2)])
        out = self.model(input_ids=input_ids, position_ids=positions[None].expand(batch, -1),
                         attention_mask=attention_masks(self.config, positions, length),
                         cache=cache, use_cache=True, logits_to_keep=1)
        updated = [t for layer in cache.layers for t in (layer.keys, layer.values)]
        return (out.logits[:, -1], *updated)


def step_for(model: torch.nn.Module, buffers: int) -> DecoderStep:
    """A ``DecoderStep`` whose ``forward`` names each cache buffer (``k0, v0, k1, ...``):
    capture maps ``Input`` specs to named parameters, not to ``*caches``."""
    names = [f"{kv}{i}" for i in range(buffers // 2) for kv in "kv"]
    params = ", ".join(names)
    scope: dict = {}
    # Note: the one generated line only forwards named buffers to ``run``
    exec(f"def forward(self, input_ids, position, {params}):\n"  # noqa: S102
         f"    return self.run(input_ids, position, {params})", scope)
    cls = type("DecoderStepOf" + type(model).__name__, (DecoderStep,),
               {"forward": scope["forward"]})
    return cls(model).eval()
