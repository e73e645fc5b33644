"""Reference semantics of TensorRT's fused attention and LLM layers (ATTENTION_INPUT,
ATTENTION_OUTPUT, ROTARY_EMBEDDING, KV_CACHE_UPDATE, RAGGED_SOFTMAX, MOE) and the reasons
the kinds that need a plugin's code or several devices (PLUGIN*, DIST_COLLECTIVE) cannot
run here."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ....kv_cache_op import write_kv
from ..registry import reference_layer
from .common import capturing
from .quantize_ops import narrow, widen

# Note [IAttention in the layer list]: INetworkDefinition.add_attention_v2 returns an
# IAttention, which is not a layer: net.get_layer(i) shows it as two layers.
# ATTENTION_INPUT takes every tensor of the attention (indices: 0 query, 1 key, 2 value,
# 3 mask, 4 normalization quantize scale, 5 query lengths, 6 key-value lengths; unset ones
# are None) and its one output already has the attention's shape and dtype; ATTENTION_OUTPUT
# takes that output and gives the tensor the network uses. So ATTENTION_INPUT computes the
# whole attention and ATTENTION_OUTPUT passes it on. The settings (norm op, causal kind, ...)
# live on the IAttention (``layer.attention``), not on either layer: the snapshot reads them
# through dotted paths. (IAttention's num_ranks is recorded as attention_num_ranks:
# ILayer.num_ranks is another setting.)
_ATTENTION_SETTINGS = {"norm_op": "norm_op", "causal": "causal", "causal_kind": "causal_kind",
                       "query_form": "query_form", "key_value_form": "key_value_form",
                       "normalization_quantize_to_type": "normalization_quantize_to_type",
                       "attention_num_ranks": "num_ranks"}
_ATTENTION_ATTRS = tuple((name, f"attention.{setting}")
                         for name, setting in _ATTENTION_SETTINGS.items())

def _quantize_dequantize(x: torch.Tensor, scale: torch.Tensor, to_type: str) -> torch.Tensor:
    """x rounded to FP8 or INT8 (quantize_ops.narrow: nearest even, saturating) in units of
    ``scale``, and back: what a value quantized inside a fused kernel contributes."""
    if to_type not in ("FP8", "INT8"):
        raise NotImplementedError(f"quantization to {to_type} inside a fused layer")
    return widen(narrow(x / scale, to_type)).to(x.dtype) * scale


def _attend(q, k, v, allowed, bias, norm_op, quantize):
    """softmax(q @ k^T + bias) @ v over padded [B, H, S, D] tensors, with no scale.

    ``allowed`` (bool, broadcast to the scores) excludes positions; ``bias`` is the additive
    mask. Key-value heads are shared by groups of Hq / Hkv consecutive query heads (GQA)."""
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    scores = q @ k.transpose(-1, -2)
    if bias is not None:
        scores = scores + bias
    if norm_op == "SOFTMAX":
        # Note [fully masked rows]: TensorRT does not document the output of a query row
        # with no allowed key (softmax would be 0/0); we write 0 there, the FlashAttention
        # convention that ONNX's Attention and torch's SDPA follow.
        scores = scores.masked_fill(~allowed, float("-inf"))
        empty = scores.isneginf().all(dim=-1, keepdim=True)
        probs = torch.softmax(scores, dim=-1).masked_fill(empty, 0.0)
    elif norm_op == "NONE":
        # Our reading: an excluded position takes no part, so it contributes 0 to the sum.
        probs = scores.masked_fill(~allowed, 0.0)
    else:
        raise NotImplementedError(f"attention normalization {norm_op}")
    if quantize is not None:
        probs = _quantize_dequantize(probs, *quantize)
    return probs @ v


def _causal(sq: int, skv: int, lengths: torch.Tensor, kind: str) -> torch.Tensor:
    """[B, 1, sq, skv] allowed positions of a causal mask: UPPER_LEFT keeps j <= i,
    LOWER_RIGHT keeps j <= i + (s_kv - s_q), s_kv each sequence's own key-value length."""
    i = torch.arange(sq, device=lengths.device).view(1, 1, -1, 1)
    j = torch.arange(skv, device=lengths.device).view(1, 1, 1, -1)
    offset = (lengths - sq).view(-1, 1, 1, 1) if kind == "LOWER_RIGHT" else 0
    return j <= i + offset


def _padded_attention(q, k, v, mask, kv_lengths, norm_op, causal_kind, quantize):
    batch, skv = q.shape[0], k.shape[2]
    lengths = torch.full((batch,), skv, device=q.device) if kv_lengths is None \
        else kv_lengths.long()
    # Note [key-value lengths]: keys at or past a sequence's length take no part.
    allowed = (torch.arange(skv, device=q.device) < lengths.view(-1, 1)).view(batch, 1, 1, -1)
    bias = None
    if mask is not None and mask.dtype == torch.bool:
        allowed = allowed & mask
    elif mask is not None:
        bias = mask.to(q.dtype)
    if causal_kind not in ("NONE", None):
        allowed = allowed & _causal(q.shape[2], skv, lengths, causal_kind)
    return _attend(q, k, v, allowed, bias, norm_op, quantize)


def _sequences(x, form, lengths, batch):
    """Each sequence of a PACKED_NHD ([tokens, H, D], cumulative lengths [B + 1]) or
    PADDED_BHND tensor as [1, H, S, D]."""
    if form != "PACKED_NHD":
        return [x[b:b + 1] for b in range(batch)]
    bounds = lengths.tolist()
    return [x[a:z].transpose(0, 1).unsqueeze(0) for a, z in zip(bounds, bounds[1:])]


def _packed_attention(q, k, v, q_lengths, kv_lengths, forms, norm_op, causal_kind, quantize):
    """Attention one sequence at a time; a packed query gives a packed output."""
    query_form, kv_form = forms
    batch = q.shape[0] if query_form != "PACKED_NHD" else q_lengths.numel() - 1
    per_seq_kv = kv_lengths if kv_form != "PACKED_NHD" else None
    outputs = []
    for b, (qb, kb, vb) in enumerate(zip(_sequences(q, query_form, q_lengths, batch),
                                         _sequences(k, kv_form, kv_lengths, batch),
                                         _sequences(v, kv_form, kv_lengths, batch))):
        length = None if per_seq_kv is None else per_seq_kv[b:b + 1]
        outputs.append(_padded_attention(qb, kb, vb, None, length, norm_op, causal_kind,
                                         quantize))
    if query_form == "PACKED_NHD":
        return torch.cat([o[0].transpose(0, 1) for o in outputs])
    return torch.cat(outputs)


@reference_layer("ATTENTION_INPUT", "IAttentionInputLayer", attrs=_ATTENTION_ATTRS)
def attention_input(inputs, norm_op, causal_kind, query_form, key_value_form,
                    normalization_quantize_to_type, causal=False, attention_num_ranks=1):
    """The whole IAttention (see Note [IAttention in the layer list]):
    ``normalize(Q @ K^T + mask) @ V`` with no 1/sqrt(d) scale (TensorRT asks the network to
    scale Q and/or K first); a bool mask marks positions allowed to attend, a float mask is
    added; causal UPPER_LEFT / LOWER_RIGHT as in trt.CausalMaskKind. Computed in float32.
    https://docs.nvidia.com/deeplearning/tensorrt/latest/_static/operators/Attention.html"""
    if attention_num_ranks not in (1, None):
        raise NotImplementedError(
            f"context-parallel attention over {attention_num_ranks} ranks: each device holds "
            f"a shard of the sequence; the reference executor runs one device")
    q, k, v, mask, quant_scale, q_lengths, kv_lengths = (list(inputs) + [None] * 7)[:7]
    if causal_kind is None:  # a TensorRT before causal_kind: the causal flag is UPPER_LEFT
        causal_kind = "UPPER_LEFT" if causal else "NONE"
    quantize = None
    if quant_scale is not None and normalization_quantize_to_type in ("FP8", "INT8"):
        quantize = (quant_scale.float(), normalization_quantize_to_type)
    qf, kf, vf = q.float(), k.float(), v.float()
    forms = (query_form, key_value_form)
    if "PACKED_NHD" in forms:
        if mask is not None:
            raise NotImplementedError("attention mask with a PACKED_NHD query or key-value")
        out = _packed_attention(qf, kf, vf, q_lengths, kv_lengths, forms, norm_op,
                                causal_kind, quantize)
    else:
        fmask = mask if mask is None or mask.dtype == torch.bool else mask.float()
        out = _padded_attention(qf, kf, vf, fmask, kv_lengths, norm_op, causal_kind, quantize)
    return (out.to(q.dtype),)


@reference_layer("ATTENTION_OUTPUT", "IAttentionOutputLayer")
def attention_output(inputs):
    """Passes on the attention ATTENTION_INPUT computed (Note [IAttention in the layer
    list])."""
    return (inputs[0],)


@reference_layer("ROTARY_EMBEDDING", "IRotaryEmbeddingLayer",
                 attrs=("interleaved", "rotary_embedding_dim"))
def rotary_embedding(inputs, interleaved, rotary_embedding_dim):
    """RoPE on x [B, N, S, H]: the first ``rotary_embedding_dim`` (0: all H) features form
    pairs (a, b) — (i, i + r/2) halves, or adjacent (2i, 2i + 1) when interleaved — each
    rotated to (a cos - b sin, b cos + a sin) with cos/sin caches [B, S, r/2], or
    [max_position + 1, r/2] indexed by position ids [B, S]; the other features pass.
    https://docs.nvidia.com/deeplearning/tensorrt/latest/inference-library/transformers-rope.html"""
    x, cos, sin = inputs[:3]
    positions = inputs[3] if len(inputs) > 3 else None
    if positions is not None:
        cos, sin = cos[positions.long()], sin[positions.long()]
    cos, sin = cos.float().unsqueeze(-3), sin.float().unsqueeze(-3)  # broadcast over heads
    r = rotary_embedding_dim or x.shape[-1]
    rot = x[..., :r].float()
    a, b = (rot[..., 0::2], rot[..., 1::2]) if interleaved else rot.split(r // 2, dim=-1)
    ra, rb = a * cos - b * sin, b * cos + a * sin
    rotated = torch.stack((ra, rb), -1).flatten(-2) if interleaved else torch.cat((ra, rb), -1)
    return (torch.cat((rotated.to(x.dtype), x[..., r:]), dim=-1),)


@reference_layer("KV_CACHE_UPDATE", "IKVCacheUpdateLayer", attrs=("cache_mode", "update_form"))
def kv_cache_update(inputs, cache_mode, update_form=None):
    """LINEAR: ``out[i, :, w[i] + s, :] = update[i, :, s, :]``, the rest of the cache kept;
    a PACKED_NHD update [tokens, N, H] holds sequence i at update_lengths[i]:[i + 1].
    https://docs.nvidia.com/deeplearning/tensorrt/latest/_static/operators/KVCacheUpdate.html"""
    cache, update, write_indices = inputs[:3]
    if cache_mode not in (None, "LINEAR"):
        raise NotImplementedError(f"KV cache mode {cache_mode}")
    # Note [in-place cache]: the output "shares the same device memory address with the
    # cache input": TensorRT writes the caller's cache, and so does the reference (the
    # static-KV-cache decoder of torch_trt_ref.llm relies on it: no cache-sized copy).
    if update_form != "PACKED_NHD":
        if not capturing():  # the bounds check reads the indices on the host
            _check_cache_writes(write_indices.long(), update.shape[2], cache.shape[2])
        return (write_kv(cache, update, write_indices),)
    lengths = inputs[3]
    for i, (start, rows) in enumerate(zip(write_indices.tolist(), _sequences(
            update, update_form, lengths, cache.shape[0]))):
        _check_cache_writes(torch.tensor([start]), rows.shape[2], cache.shape[2], i)
        cache[i, :, start:start + rows.shape[2]] = rows[0].to(cache.dtype)
    return (cache,)


def _check_cache_writes(starts, rows: int, size: int, sequence: int | None = None) -> None:
    if bool((starts < 0).any()) or int((starts + rows).max()) > size:
        which = "" if sequence is None else f" of sequence {sequence}"
        raise IndexError(f"KV cache update{which}: {rows} rows written from positions "
                         f"{starts.tolist()} fall outside the cache's {size}")


@reference_layer("RAGGED_SOFTMAX", "IRaggedSoftMaxLayer")
def ragged_softmax(inputs):
    """Softmax over the last dim of each sequence's first ``bounds`` elements (bounds shaped
    [..., 1]); the elements past the bound are 0.
    https://docs.nvidia.com/deeplearning/tensorrt/latest/_static/operators/RaggedSoftMax.html"""
    x, bounds = inputs
    inside = torch.arange(x.shape[-1], device=x.device) < bounds.long()
    probs = torch.softmax(x.float().masked_fill(~inside, float("-inf")), dim=-1)
    return (probs.masked_fill(~inside, 0.0).to(x.dtype),)


_MOE_ACTIVATIONS = {"NONE": lambda x: x, "SILU": F.silu}


@reference_layer("MOE", "IMoELayer",
                 attrs=("activation_type", "quantization_to_type", "swiglu_param_limit",
                        "swiglu_param_alpha", "swiglu_param_beta"))
def moe(inputs, activation_type, quantization_to_type, swiglu_param_limit, swiglu_param_alpha,
        swiglu_param_beta):
    """Each token x [H] goes to its top-k experts e = selected[..., k] and the outputs are
    summed weighted by scores[..., k]; expert e is a GLU:
    ``(act(x @ Wg[e] + bg[e]) * (x @ Wu[e] + bu[e])) @ Wd[e] + bd[e]`` with Wg, Wu
    [E, H, I], Wd [E, I, H]; with static quantization the product is rounded to FP8 in units
    of the scale ([] or [E]) first.
    https://docs.nvidia.com/deeplearning/tensorrt/latest/inference-library/transformers-moe.html"""
    if (swiglu_param_limit, swiglu_param_alpha, swiglu_param_beta) not in (
            (float("inf"), 1.0, 0.0), (None, None, None)):
        raise NotImplementedError("MoE SwiGLU parameters (not supported by TensorRT yet)")
    hidden, selected, scores, w_gate, w_up, w_down = inputs[:6]
    b_gate, b_up, b_down, down_scale = (list(inputs[6:]) + [None] * 4)[:4]
    x = hidden.float()
    experts = selected.long()
    act = _MOE_ACTIVATIONS[activation_type]

    def linear(value, weight, bias):  # per token and choice: value @ weight[e] + bias[e]
        out = torch.einsum("...ki,...kio->...ko", value, weight.float()[experts])
        return out if bias is None else out + bias.float()[experts]

    tokens = x.unsqueeze(-2).expand(*experts.shape, x.shape[-1])  # [..., topK, H]
    product = act(linear(tokens, w_gate, b_gate)) * linear(tokens, w_up, b_up)
    if down_scale is not None and quantization_to_type in ("FP8", "INT8"):
        scale = down_scale.float()
        scale = scale[experts].unsqueeze(-1) if scale.dim() else scale
        product = _quantize_dequantize(product, scale, quantization_to_type)
    expert_out = linear(product, w_down, b_down)
    return ((expert_out * scores.float().unsqueeze(-1)).sum(-2).to(hidden.dtype),)


# Note [kinds the reference cannot run]: these are left unregistered on purpose, so that
# snapshot.unsupported_kinds() still names them and compile keeps such segments in PyTorch;
# the table says why, for the executor's error.
UNRUNNABLE_KINDS = {
    "PLUGIN": "runs a plugin's own CUDA code, which the reference executor cannot run",
    "PLUGIN_V2": "runs an IPluginV2's own CUDA code, which the reference executor cannot run",
    "PLUGIN_V3": "runs an IPluginV3's own CUDA code, which the reference executor cannot run "
                 "(only conversion.plugin's layers, which call a custom op, run: plugin_ops.py)",
    "DIST_COLLECTIVE": "is a collective across several devices (ranks); the reference "
                       "executor runs one device",
}


def unrunnable_reason(kind: str) -> str | None:
    """Why the reference executor cannot run layer kind ``kind``, or None."""
    reason = UNRUNNABLE_KINDS.get(kind)
    return None if reason is None else f"TensorRT layer kind {kind} {reason}"
