"""Reference ATTENTION_INPUT / ATTENTION_OUTPUT, ROTARY_EMBEDDING, KV_CACHE_UPDATE,
RAGGED_SOFTMAX and MOE layers, run from networks built through TensorRT's Python API and
snapshotted, against hand-derived values and explicit float64 loops written here from
TensorRT's operator documents; and against ONNX's expected outputs for the ONNX node cases
TensorRT's parser turns into these kinds. PLUGIN*, DIST_COLLECTIVE: the executor refuses
them with a reason."""

import functools
import math

import numpy as np
import pytest
import torch

from torch_trt_ref._trt import make_logger, to_trt_dtype, trt
from torch_trt_ref.runtime.reference.executor import run_snapshot
from torch_trt_ref.runtime.reference.layers.attention_ops import (
    UNRUNNABLE_KINDS,
    unrunnable_reason,
)
from torch_trt_ref.runtime.reference.registry import REFERENCE_LAYERS
from torch_trt_ref.runtime.snapshot import LayerRecord, NetworkSnapshot, TensorInfo, take_snapshot

SOFTMAX, NO_NORM = trt.AttentionNormalizationOp.SOFTMAX, trt.AttentionNormalizationOp.NONE
CAUSAL = trt.CausalMaskKind


def run_network(add_layer, **inputs):
    """Build a network with ``inputs`` as network inputs, add one layer (or IAttention)
    with ``add_layer(net, tensors)``, snapshot it and run it on the inputs. Returns the
    output and the snapshot."""
    builder = trt.Builder(make_logger())
    net = builder.create_network(0)
    tensors = {name: net.add_input(name, to_trt_dtype(value.dtype), tuple(value.shape))
               for name, value in inputs.items()}
    layer = add_layer(net, tensors)
    net.mark_output(layer.get_output(0))
    snapshot = take_snapshot(net, {})
    (out,) = run_snapshot(snapshot, inputs)
    return out, snapshot


def randn(*shape, seed=0, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


# ---------------------------------------------------------------------------------------
# Attention: softmax(Q K^T + mask) V with no scale
# (https://docs.nvidia.com/deeplearning/tensorrt/latest/_static/operators/Attention.html)

def attention64(q, k, v, allowed=None, bias=None, softmax=True):
    """Explicit float64 loops over (batch, head, query): the weights of the allowed keys j
    are softmax_j(q_i . k_j + bias) (or the raw scores without softmax) and the output is
    sum_j w_j v_j; query head h reads key-value head h // (Hq / Hkv)."""
    q, k, v = q.double(), k.double(), v.double()
    batch, hq, sq, _ = q.shape
    hkv, skv = k.shape[1], k.shape[2]
    out = torch.zeros(batch, hq, sq, v.shape[-1], dtype=torch.float64)
    for b in range(batch):
        for h in range(hq):
            g = h // (hq // hkv)
            for i in range(sq):
                keys = [j for j in range(skv) if allowed is None or allowed(b, h, i, j)]
                scores = [float(q[b, h, i] @ k[b, g, j]) + (bias(b, h, i, j) if bias else 0.0)
                          for j in keys]
                if softmax and keys:
                    top = max(scores)
                    exps = [math.exp(s - top) for s in scores]
                    scores = [e / sum(exps) for e in exps]
                for w, j in zip(scores, keys):
                    out[b, h, i] += w * v[b, g, j]
    return out


def add_attention(q="q", k="k", v="v", norm=SOFTMAX, causal=CAUSAL.NONE, **settings):
    def add(net, t):
        attention = net.add_attention_v2(t[q], t[k], t[v], norm, causal)
        for name, value in settings.items():
            setattr(attention, name, t[value] if isinstance(value, str) else value)
        return attention
    return add


def test_attention_is_two_boundary_layers_and_applies_no_scale():
    # scores q.k = [1, 0] (no 1/sqrt(2)): weights e/(e+1), 1/(e+1); out = e/(e+1)
    q, k = torch.tensor([[[[1.0, 0.0]]]]), torch.tensor([[[[1.0, 0.0], [0.0, 0.0]]]])
    v = torch.tensor([[[[1.0, 0.0], [0.0, 0.0]]]])
    out, snapshot = run_network(add_attention(), q=q, k=k, v=v)
    assert [layer.kind for layer in snapshot.layers] == ["ATTENTION_INPUT", "ATTENTION_OUTPUT"]
    assert snapshot.layers[0].attrs["norm_op"] == "SOFTMAX"
    assert out[0, 0, 0, 0].item() == pytest.approx(math.e / (math.e + 1), rel=1e-6)


def test_attention_gqa_matches_float64_loops():
    q, k, v = randn(2, 4, 3, 8, seed=1), randn(2, 2, 5, 8, seed=2), randn(2, 2, 5, 8, seed=3)
    out, _ = run_network(add_attention(), q=q, k=k, v=v)
    torch.testing.assert_close(out.double(), attention64(q, k, v), rtol=1e-5, atol=1e-6)


def test_attention_bool_mask_allows_true_positions():
    q, k, v = randn(2, 2, 3, 4, seed=4), randn(2, 2, 4, 4, seed=5), randn(2, 2, 4, 4, seed=6)
    mask = randn(1, 2, 3, 4, seed=7) > 0
    mask[..., 0] = True  # no fully masked row
    out, _ = run_network(add_attention(mask="mask"), q=q, k=k, v=v, mask=mask)
    expected = attention64(q, k, v, allowed=lambda b, h, i, j: bool(mask[0, h, i, j]))
    torch.testing.assert_close(out.double(), expected, rtol=1e-5, atol=1e-6)


def test_attention_float_mask_is_added_to_the_scores():
    q, k, v = randn(2, 2, 3, 4, seed=8), randn(2, 2, 4, 4, seed=9), randn(2, 2, 4, 4, seed=10)
    mask = randn(2, 1, 3, 4, seed=11)
    out, _ = run_network(add_attention(mask="mask"), q=q, k=k, v=v, mask=mask)
    expected = attention64(q, k, v, bias=lambda b, h, i, j: float(mask[b, 0, i, j]))
    torch.testing.assert_close(out.double(), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind,expected", [
    # q = 0: equal scores, so each output is the mean of the allowed values v_j = j.
    # UPPER_LEFT allows j <= i: rows {0}, {0, 1}; LOWER_RIGHT j <= i + (4 - 2): {0..2}, {0..3}
    (CAUSAL.UPPER_LEFT, [0.0, 0.5]),
    (CAUSAL.LOWER_RIGHT, [1.0, 1.5]),
])
def test_attention_causal_alignment(kind, expected):
    q, k = torch.zeros(1, 1, 2, 2), torch.ones(1, 1, 4, 2)
    v = torch.arange(4.0).reshape(1, 1, 4, 1).expand(1, 1, 4, 2).contiguous()
    out, snapshot = run_network(add_attention(causal=kind), q=q, k=k, v=v)
    assert snapshot.layers[0].attrs["causal_kind"] == kind.name
    assert out[0, 0, :, 0].tolist() == pytest.approx(expected)


def test_attention_key_value_lengths_with_lower_right_causal():
    # sequence b keeps keys j < L_b, and LOWER_RIGHT aligns to L_b: j <= i + L_b - s_q
    q, k, v = randn(2, 2, 2, 4, seed=12), randn(2, 1, 5, 4, seed=13), randn(2, 1, 5, 4, seed=14)
    lengths = torch.tensor([5, 3], dtype=torch.int32)
    out, _ = run_network(add_attention(causal=CAUSAL.LOWER_RIGHT, key_value_lengths="lengths"),
                         q=q, k=k, v=v, lengths=lengths)
    allowed = lambda b, h, i, j: j < lengths[b] and j <= i + int(lengths[b]) - 2  # noqa: E731
    torch.testing.assert_close(out.double(), attention64(q, k, v, allowed), rtol=1e-5,
                               atol=1e-6)


@pytest.mark.parametrize("causal", [CAUSAL.NONE, CAUSAL.LOWER_RIGHT])
def test_attention_packed_query_and_key_value(causal):
    # PACKED_NHD [tokens, heads, dim] with cumulative lengths: sequence 0 has 2 query and 3
    # key tokens, sequence 1 has 1 and 2; each is its own attention (and causal alignment)
    q, k, v = randn(3, 2, 4, seed=15), randn(5, 1, 4, seed=16), randn(5, 1, 4, seed=17)
    q_cum, kv_cum = torch.tensor([0, 2, 3]).int(), torch.tensor([0, 3, 5]).int()
    packed = trt.AttentionIOForm.PACKED_NHD
    out, _ = run_network(
        add_attention(causal=causal, query_form=packed, key_value_form=packed,
                      query_lengths="q_cum", key_value_lengths="kv_cum"),
        q=q, k=k, v=v, q_cum=q_cum, kv_cum=kv_cum)
    seq = lambda x, a, z: x[a:z].transpose(0, 1).unsqueeze(0)  # noqa: E731

    def allowed(sq, skv):
        if causal == CAUSAL.NONE:
            return None
        return lambda b, h, i, j: j <= i + skv - sq

    expected = torch.cat([
        attention64(seq(q, 0, 2), seq(k, 0, 3), seq(v, 0, 3), allowed(2, 3))[0].transpose(0, 1),
        attention64(seq(q, 2, 3), seq(k, 3, 5), seq(v, 3, 5), allowed(1, 2))[0].transpose(0, 1)])
    torch.testing.assert_close(out.double(), expected, rtol=1e-5, atol=1e-6)


def test_attention_packed_query_padded_key_value():
    # a packed query [tokens, heads, dim] (sequences of 2 and 1 tokens) against padded
    # key-values [B, heads, S, dim] of valid lengths 3 and 2
    q, k, v = randn(3, 2, 4, seed=40), randn(2, 1, 3, 4, seed=41), randn(2, 1, 3, 4, seed=42)
    q_cum, kv_len = torch.tensor([0, 2, 3]).int(), torch.tensor([3, 2]).int()
    out, _ = run_network(
        add_attention(query_form=trt.AttentionIOForm.PACKED_NHD, query_lengths="q_cum",
                      key_value_lengths="kv_len"), q=q, k=k, v=v, q_cum=q_cum, kv_len=kv_len)
    expected = torch.cat([
        attention64(q[0:2].transpose(0, 1)[None], k[0:1, :, :3], v[0:1, :, :3])[0],
        attention64(q[2:3].transpose(0, 1)[None], k[1:2, :, :2], v[1:2, :, :2])[0]],
        dim=1).transpose(0, 1)
    torch.testing.assert_close(out.double(), expected, rtol=1e-5, atol=1e-6)


def run_attention_input(inputs, **settings):
    attrs = dict(norm_op="SOFTMAX", causal_kind="NONE", query_form="PADDED_BHND",
                 key_value_form="PADDED_BHND", normalization_quantize_to_type=None)
    return REFERENCE_LAYERS["ATTENTION_INPUT"].run(inputs, **{**attrs, **settings})


def test_attention_causal_flag_without_causal_kind_is_upper_left():
    # a TensorRT without causal_kind records None; its causal flag means UPPER_LEFT:
    # q = 0, v_j = j, query rows allow {0} and {0, 1}
    q, k = torch.zeros(1, 1, 2, 1), torch.ones(1, 1, 4, 1)
    v = torch.arange(4.0).reshape(1, 1, 4, 1)
    (out,) = run_attention_input([q, k, v], causal_kind=None, causal=True)
    assert out.flatten().tolist() == [0.0, 0.5]


def test_attention_over_several_ranks_is_an_error():
    # IAttention.num_ranks > 1: context-parallel, each device holds a shard of the sequence
    q = torch.zeros(1, 1, 2, 2)
    with pytest.raises(NotImplementedError, match="2 ranks"):
        run_network(add_attention(num_ranks=2), q=q, k=q, v=q)


def test_attention_mask_with_packed_form_is_an_error():
    q, mask = torch.zeros(2, 1, 2), torch.ones(1, 1, 2, 2, dtype=torch.bool)
    lengths = torch.tensor([0, 2]).int()
    with pytest.raises(NotImplementedError, match="PACKED_NHD"):
        run_attention_input([q, q, q, mask, None, lengths, lengths], query_form="PACKED_NHD",
                            key_value_form="PACKED_NHD")


def test_attention_half_inputs_give_half_output():
    q, k, v = (randn(1, 2, 3, 8, seed=s, dtype=torch.float16) for s in (18, 19, 20))
    out, _ = run_network(add_attention(), q=q, k=k, v=v)
    assert out.dtype == torch.float16
    torch.testing.assert_close(out.double(), attention64(q, k, v), rtol=2e-3, atol=2e-3)


def test_attention_without_normalization_uses_raw_scores():
    q, k, v = randn(1, 1, 2, 3, seed=21), randn(1, 1, 3, 3, seed=22), randn(1, 1, 3, 3, seed=23)
    mask = randn(1, 1, 2, 3, seed=24)
    out, _ = run_network(add_attention(norm=NO_NORM, mask="mask"), q=q, k=k, v=v, mask=mask)
    expected = attention64(q, k, v, bias=lambda b, h, i, j: float(mask[0, 0, i, j]),
                           softmax=False)
    torch.testing.assert_close(out.double(), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("to_type,scale,expected", [
    # three equal scores: p = 1/3 each. FP8 e4m3 (3 mantissa bits) rounds 1/3 = 1.0101b x 2^-2
    # up to 1.011b x 2^-2 = 0.34375; three of them times v = 1 sum to 1.03125
    (trt.DataType.FP8, 1.0, 1.03125),
    # INT8 in units of 0.1: 1/3 / 0.1 = 3.33 -> 3 -> 0.3; summed 0.9
    (trt.DataType.INT8, 0.1, 0.9),
])
def test_attention_normalization_quantized(to_type, scale, expected):
    q, k, v = torch.zeros(1, 1, 1, 2), torch.zeros(1, 1, 3, 2), torch.ones(1, 1, 3, 2)
    out, _ = run_network(
        add_attention(normalization_quantize_scale="scale",
                      normalization_quantize_to_type=to_type),
        q=q, k=k, v=v, scale=torch.tensor(scale))
    assert out[0, 0, 0, 0].item() == pytest.approx(expected, rel=1e-6)


# ---------------------------------------------------------------------------------------
# RoPE (https://docs.nvidia.com/deeplearning/tensorrt/latest/inference-library/
# transformers-rope.html)

def add_rope(interleaved, dim=0, positions=False):
    def add(net, t):
        layer = net.add_rotary_embedding(t["x"], t["cos"], t["sin"], interleaved, dim)
        if positions:
            layer.set_input(3, t["positions"])
        return layer
    return add


@pytest.mark.parametrize("interleaved,expected", [
    # a quarter turn maps each pair (a, b) to (-b, a). Pairs (x0, x2), (x1, x3) ...
    (False, [-3.0, -4.0, 1.0, 2.0]),
    # ... or adjacent (x0, x1), (x2, x3)
    (True, [-2.0, 1.0, -4.0, 3.0]),
])
def test_rotary_embedding_quarter_turn(interleaved, expected):
    x = torch.tensor([1.0, 2.0, 3.0, 4.0]).reshape(1, 1, 1, 4)
    cos, sin = torch.zeros(1, 1, 2), torch.ones(1, 1, 2)
    out, snapshot = run_network(add_rope(interleaved), x=x, cos=cos, sin=sin)
    assert snapshot.layers[0].kind == "ROTARY_EMBEDDING"
    assert out.flatten().tolist() == pytest.approx(expected, abs=1e-7)


def rope64(x, angles, interleaved, r):
    """Explicit rotation of each feature pair p by angles[..., p] (broadcast over heads)."""
    out = x.double().clone()
    c, s = torch.cos(angles.double()).unsqueeze(1), torch.sin(angles.double()).unsqueeze(1)
    for p in range(r // 2):
        i0, i1 = (2 * p, 2 * p + 1) if interleaved else (p, p + r // 2)
        a, b = x[..., i0].double(), x[..., i1].double()
        out[..., i0] = c[..., p] * a - s[..., p] * b
        out[..., i1] = s[..., p] * a + c[..., p] * b
    return out


@pytest.mark.parametrize("interleaved", [False, True])
def test_rotary_embedding_position_ids_and_partial_dim(interleaved):
    # caches indexed by position ids; only the first 4 of 6 features rotate
    x = randn(2, 3, 4, 6, seed=25)
    table = randn(10, 2, seed=26)  # angle of (position, pair)
    positions = torch.tensor([[0, 3, 5, 9], [1, 1, 2, 8]])
    out, _ = run_network(add_rope(interleaved, dim=4, positions=True), x=x,
                         cos=torch.cos(table), sin=torch.sin(table), positions=positions)
    torch.testing.assert_close(out.double(), rope64(x, table[positions], interleaved, 4),
                               rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------------------
# KV cache (https://docs.nvidia.com/deeplearning/tensorrt/latest/_static/operators/
# KVCacheUpdate.html): out[i, :, w[i] + s, :] = update[i, :, s, :]

def add_kv_cache(packed=False):
    def add(net, t):
        layer = net.add_kv_cache_update(t["cache"], t["update"], t["write"],
                                        trt.KVCacheMode.LINEAR)
        if packed:
            layer.update_form = trt.AttentionIOForm.PACKED_NHD
            layer.update_lengths = t["lengths"]
        return layer
    return add


def test_kv_cache_update_writes_each_sequence_at_its_index():
    cache = torch.zeros(2, 1, 5, 1)
    update = torch.tensor([1.0, 2.0, 3.0, 4.0]).reshape(2, 1, 2, 1)
    out, snapshot = run_network(add_kv_cache(), cache=cache, update=update,
                                write=torch.tensor([0, 3], dtype=torch.int32))
    assert snapshot.layers[0].kind == "KV_CACHE_UPDATE"
    assert out.flatten().tolist() == [1, 2, 0, 0, 0, 0, 0, 0, 3, 4]


def test_kv_cache_update_packed_tokens():
    # sequence 0 has tokens 0..2 (written at 1..3), sequence 1 token 3 (written at 0)
    cache = torch.full((2, 1, 4, 1), -1.0)
    update = torch.tensor([1.0, 2.0, 3.0, 4.0]).reshape(4, 1, 1)
    out, _ = run_network(add_kv_cache(packed=True), cache=cache, update=update,
                         write=torch.tensor([1, 0]), lengths=torch.tensor([0, 3, 4]).int())
    assert out.flatten().tolist() == [-1, 1, 2, 3, 4, -1, -1, -1]


def test_kv_cache_update_past_the_cache_is_an_error():
    run = REFERENCE_LAYERS["KV_CACHE_UPDATE"].run
    with pytest.raises(IndexError, match="outside the cache"):
        run([torch.zeros(1, 1, 3, 1), torch.ones(1, 1, 2, 1), torch.tensor([2])],
            cache_mode="LINEAR", update_form="PADDED_BHND")


# ---------------------------------------------------------------------------------------
# Ragged softmax (https://docs.nvidia.com/deeplearning/tensorrt/latest/_static/operators/
# RaggedSoftMax.html)

def test_ragged_softmax_documented_example():
    x = torch.tensor([[[1.0, 1.0, 1.0, 1.0, 0.5], [3.0, 4.0, -20.0, 10.0, 5.0]]])
    bounds = torch.tensor([5, 3], dtype=torch.int32).reshape(1, 2, 1)
    out, snapshot = run_network(lambda net, t: net.add_ragged_softmax(t["x"], t["bounds"]),
                                x=x, bounds=bounds)
    assert snapshot.layers[0].kind == "RAGGED_SOFTMAX"
    # the document's values, which it gives to within 0.01 (0.217 shows as 0.21)
    expected = [[[0.21, 0.21, 0.21, 0.21, 0.13], [0.26, 0.73, 0.01, 0.0, 0.0]]]
    torch.testing.assert_close(out, torch.tensor(expected), rtol=0, atol=0.0101)
    # exactly: row 1 is softmax(3, 4, -20) then zeros
    e = [math.exp(3.0), math.exp(4.0), math.exp(-20.0)]
    assert out[0, 1].tolist() == pytest.approx([v / sum(e) for v in e] + [0, 0], rel=1e-6)


# ---------------------------------------------------------------------------------------
# MoE (https://docs.nvidia.com/deeplearning/tensorrt/latest/inference-library/
# transformers-moe.html)

def add_moe(activation, biases=False):
    def add(net, t):
        layer = net.add_moe(t["x"], t["experts"], t["scores"])
        layer.set_gated_weights(t["w_gate"], t["w_up"], t["w_down"], activation)
        if biases:
            layer.set_gated_biases(t["b_gate"], t["b_up"], t["b_down"])
        return layer
    return add


def test_moe_hand_derived_glu():
    # one feature: expert e computes (x * g_e) * (x * u_e) * d_e; token x = 2 picks experts
    # 1 (score 0.25) and 0 (score 1): 0.25 * (2*3)(2*1)(0.5) + 1 * (2*1)(2*1)(1) = 1.5 + 4
    x = torch.tensor([2.0]).reshape(1, 1, 1)
    gate, up = torch.tensor([1.0, 3.0]).reshape(2, 1, 1), torch.tensor([1.0, 1.0]).reshape(2, 1, 1)
    down = torch.tensor([1.0, 0.5]).reshape(2, 1, 1)
    out, snapshot = run_network(
        add_moe(trt.MoEActType.NONE), x=x, experts=torch.tensor([[[1, 0]]], dtype=torch.int32),
        scores=torch.tensor([[[0.25, 1.0]]]), w_gate=gate, w_up=up, w_down=down)
    assert snapshot.layers[0].kind == "MOE"
    assert out.item() == pytest.approx(5.5)


def test_moe_static_fp8_quantization_of_the_product():
    # gate 1 * up 1.1 = 1.1 = 1.000110011b: FP8 e4m3 keeps 3 mantissa bits, the rest
    # (0.0110b of a unit in the last place) rounds up to 1.001b = 1.125, times down = 1
    def add(net, t):
        layer = add_moe(trt.MoEActType.NONE)(net, t)
        layer.set_quantization_static(t["scale"], trt.DataType.FP8)
        return layer
    one = torch.ones(1, 1, 1)
    out, _ = run_network(add, x=one, experts=torch.zeros(1, 1, 1, dtype=torch.int32),
                         scores=one, w_gate=one, w_up=torch.full((1, 1, 1), 1.1), w_down=one,
                         scale=torch.tensor(1.0))
    assert out.item() == pytest.approx(1.125)


def test_moe_silu_with_biases_matches_float64_loops():
    tokens, hidden, inner, experts, top = (2, 3), 4, 5, 3, 2
    t = dict(x=randn(*tokens, hidden, seed=30), scores=randn(*tokens, top, seed=31),
             experts=torch.tensor([[[0, 2], [1, 0], [2, 2]], [[1, 2], [0, 1], [2, 0]]]).int(),
             w_gate=randn(experts, hidden, inner, seed=32),
             w_up=randn(experts, hidden, inner, seed=33),
             w_down=randn(experts, inner, hidden, seed=34),
             b_gate=randn(experts, inner, seed=35), b_up=randn(experts, inner, seed=36),
             b_down=randn(experts, hidden, seed=37))
    out, _ = run_network(add_moe(trt.MoEActType.SILU, biases=True), **t)
    d = {name: value.double() for name, value in t.items()}
    expected = torch.zeros(*tokens, hidden, dtype=torch.float64)
    for index in np.ndindex(*tokens):
        x = d["x"][index]
        for choice in range(top):
            e = int(t["experts"][index][choice])
            gate = x @ d["w_gate"][e] + d["b_gate"][e]
            glu = gate / (1 + torch.exp(-gate)) * (x @ d["w_up"][e] + d["b_up"][e])
            expected[index] += d["scores"][index][choice] * (glu @ d["w_down"][e]
                                                             + d["b_down"][e])
    torch.testing.assert_close(out.double(), expected, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------------------
# Kinds that need a plugin's code or several devices

def test_dist_collective_is_left_to_pytorch_with_a_reason():
    builder = trt.Builder(make_logger())
    net = builder.create_network(0)
    x = net.add_input("x", trt.float32, (4,))
    layer = net.add_dist_collective(x, trt.CollectiveOperation.ALL_REDUCE,
                                    trt.ReduceOperation.SUM, -1, None)
    net.mark_output(layer.get_output(0))
    snapshot = take_snapshot(net, {})
    # unregistered, so compile keeps such a segment in PyTorch (compiler.py)
    assert snapshot.unsupported_kinds() == ["DIST_COLLECTIVE"]
    with pytest.raises(NotImplementedError, match="DIST_COLLECTIVE"):
        run_snapshot(snapshot, {"x": torch.ones(4)})
    assert "several devices" in unrunnable_reason("DIST_COLLECTIVE")


@pytest.mark.parametrize("kind", ["PLUGIN", "PLUGIN_V2", "PLUGIN_V3"])
def test_plugin_kinds_have_a_reason(kind):
    # tensorrt_rtx's Python API has no add_plugin*: only a parser can make these layers;
    # PLUGIN_V3 runs where it is conversion.plugin's (a custom op), else raises the reason
    assert (kind in REFERENCE_LAYERS) == (kind == "PLUGIN_V3")
    assert "plugin" in unrunnable_reason(kind).lower()
    assert unrunnable_reason("ELEMENTWISE") is None


def _snapshot_of(kind: str) -> NetworkSnapshot:
    x = TensorInfo("x", (4,), torch.float32)
    return NetworkSnapshot([x], ["y"], [LayerRecord("l", kind, ["x"], [
        TensorInfo("y", (4,), torch.float32)])])


@pytest.mark.parametrize("kind", sorted(UNRUNNABLE_KINDS))
def test_executor_error_gives_the_reason(kind):
    with pytest.raises(NotImplementedError) as error:
        run_snapshot(_snapshot_of(kind), {"x": torch.ones(4)})
    assert unrunnable_reason(kind) in str(error.value)


# ---------------------------------------------------------------------------------------
# ONNX node cases whose TensorRT networks use these kinds, against ONNX's expected outputs

ONNX_PASS = [
    "test_attention_3d", "test_attention_3d_causal", "test_attention_3d_causal_bf16",
    "test_attention_3d_gqa", "test_attention_3d_gqa_causal", "test_attention_3d_gqa_scaled",
    "test_attention_3d_scaled", "test_attention_3d_transpose_verification",
    "test_attention_4d", "test_attention_4d_attn_mask_3d", "test_attention_4d_attn_mask_4d",
    "test_attention_4d_attn_mask_bool_4d", "test_attention_4d_causal",
    "test_attention_4d_causal_bf16", "test_attention_4d_causal_fp16", "test_attention_4d_fp16",
    "test_attention_4d_gqa", "test_attention_4d_gqa_causal", "test_attention_4d_gqa_scaled",
    "test_attention_4d_scaled", "test_attention_local_window_default",
    "test_rotary_embedding", "test_rotary_embedding_3d_input",
    "test_rotary_embedding_interleaved", "test_rotary_embedding_no_position_ids",
    "test_rotary_embedding_no_position_ids_interleaved",
    "test_rotary_embedding_no_position_ids_rotary_dim",
    "test_rotary_embedding_with_interleaved_rotary_dim", "test_rotary_embedding_with_rotary_dim",
    # the parser adds the layers making the mask after the ATTENTION_INPUT reading it (the
    # snapshot puts layers in dependency order); the first has a fully masked query row,
    # where ONNX expects 0 (Note [fully masked rows])
    "test_attention_23_boolmask_fullymasked_row_nan_robustness", "test_attention_3d_attn_mask",
    "test_attention_3d_gqa_attn_mask", "test_attention_4d_attn_mask",
    "test_attention_4d_attn_mask_bool", "test_attention_4d_gqa_attn_mask",
    "test_tensorscatter",  # KV_CACHE_UPDATE
]
# The parser drops nonpad_kv_seqlen (and makes is_causal UPPER_LEFT) or the window sizes:
# the network computes another function than the ONNX node.
ONNX_PARSER_DROPS = {
    "test_attention_4d_causal_nonpad_batch_prefill": "nonpad_kv_seqlen",
    "test_attention_4d_causal_nonpad_continued_prefill": "nonpad_kv_seqlen",
    "test_attention_4d_causal_nonpad_negative_offset_structural_empty": "nonpad_kv_seqlen",
    "test_attention_4d_gqa_causal_nonpad_decode": "nonpad_kv_seqlen",
    "test_attention_4d_gqa_causal_nonpad_decode_fp16": "nonpad_kv_seqlen",
    "test_attention_bidirectional_window": "left/right_window_size",
    "test_attention_local_window": "left/right_window_size",
}


@functools.lru_cache(maxsize=1)
def onnx_cases():
    import warnings

    from onnx.backend.test.case.node import collect_testcases
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {case.name: case for case in collect_testcases(None)}


def onnx_arrays(values):
    from onnx import TensorProto, numpy_helper
    return [numpy_helper.to_array(v) if isinstance(v, TensorProto) else np.asarray(v)
            for v in values]


def to_torch(array):
    if array.dtype.name == "bfloat16":
        return torch.from_numpy(array.view(np.uint16).copy()).view(torch.bfloat16)
    return torch.from_numpy(array.copy())


def run_onnx_case(name):
    case = onnx_cases()[name]
    builder = trt.Builder(make_logger())
    net = builder.create_network(0)
    parser = trt.OnnxParser(net, make_logger())
    assert parser.parse(case.model.SerializeToString())
    snapshot = take_snapshot(net, {})
    assert set(snapshot.kinds()) & {"ATTENTION_INPUT", "ROTARY_EMBEDDING", "KV_CACHE_UPDATE"}
    (data_in, data_out), = case.data_sets
    initializers = {init.name for init in case.model.graph.initializer}
    names = [i.name for i in case.model.graph.input if i.name not in initializers]
    arrays = dict(zip(names, onnx_arrays(data_in)))
    feeds = {info.name: to_torch(arrays[info.name]).to(info.dtype) for info in snapshot.inputs}
    for expected, actual in zip(onnx_arrays(data_out), run_snapshot(snapshot, feeds)):
        # ONNX's node-test tolerances (rtol 1e-3, atol 1e-7; rtol 2^-6 for bfloat16)
        rtol = 2.0 ** -6 if actual.dtype == torch.bfloat16 else case.rtol
        np.testing.assert_allclose(actual.double().numpy(), to_torch(expected).double().numpy(),
                                   rtol=rtol, atol=case.atol)


@pytest.mark.parametrize("name", ONNX_PASS)
def test_onnx_case(name):
    run_onnx_case(name)


@pytest.mark.parametrize("name", sorted(ONNX_PARSER_DROPS))
@pytest.mark.xfail(strict=True, raises=AssertionError,
                   reason="TensorRT's ONNX parser drops an input or attribute")
def test_onnx_case_parser_drops(name):
    run_onnx_case(name)


@pytest.mark.parametrize("name", [n for n, what in ONNX_PARSER_DROPS.items()
                                  if what == "nonpad_kv_seqlen"])
def test_onnx_nonpad_cases_direct(name):
    """What the parser loses, given straight to ATTENTION_INPUT: key_value_lengths =
    nonpad_kv_seqlen, LOWER_RIGHT causal, Q pre-scaled by 1/sqrt(d) (as the parser does)."""
    case = onnx_cases()[name]
    (data_in, data_out), = case.data_sets
    q, k, v, *_, lengths = [torch.from_numpy(a) for a in onnx_arrays(data_in)]
    scale = torch.tensor(q.shape[-1] ** -0.5, dtype=q.dtype)
    (out,) = REFERENCE_LAYERS["ATTENTION_INPUT"].run(
        [q * scale, k, v, None, None, None, lengths.int()], norm_op="SOFTMAX",
        causal_kind="LOWER_RIGHT", query_form="PADDED_BHND", key_value_form="PADDED_BHND",
        normalization_quantize_to_type=None, attention_num_ranks=1)
    np.testing.assert_allclose(out.double().numpy(), onnx_arrays(data_out)[0].astype(float),
                               rtol=case.rtol, atol=max(case.atol, 1e-6))
