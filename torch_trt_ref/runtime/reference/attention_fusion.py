"""Recognized patterns of the prepared replay (``replay.py``): layers nothing reads are
dropped, and the attention that torch's ``scaled_dot_product_attention`` decomposes into is
run as one ``F.scaled_dot_product_attention`` call, as TensorRT's builder fuses multi-head
attention into one kernel. The slow route (``run_snapshot``) runs every layer as recorded;
the tests hold the two equal within the float64 rule.

Note [Attention fusion]: torch's decomposition of SDPA (a "safe" softmax) reaches the
network as

    S = Q @ K^T;  X = S * c [+ mask];  M = max(X, -1);  z = (M == -inf)
    E = exp(X - where(z, 0, M));  P = E / sum(E, -1);  out = where(z, 0, P @ V)

(plus its logsumexp, ``log(sum) + where(z, 0, M)``, which nothing reads). That is
``F.scaled_dot_product_attention(Q, K, V, attn_mask=mask, scale=c)`` with the rows whose
scores are all -inf set to 0. Fused, such rows are found from the mask (all -inf along the
key dim); a constant mask without such rows skips that step, and a constant mask of zeros
is left out (adding 0 changes nothing). The two differ only where a whole row of finite
``mask`` plus ``Q @ K^T * c`` overflows to -inf: there the fused call gives what eager's own
SDPA gives. It fuses only when every intermediate is read by the pattern alone, the
reductions run over the last dim of rank-4 tensors with kept dims, ``c`` and the 0 and
-inf are scalar constants, and Q, K, V and the mask share one floating dtype; anything else
(a softmax written out by hand, attention probabilities returned too) replays layer by
layer."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

_SIDE_EFFECTS = ("ASSERTION",)  # layers run for what they check, not for their outputs
_FOLDABLE = ("CONSTANT", "SHUFFLE", "CAST", "IDENTITY", "SELECT", "ELEMENTWISE", "UNARY")


def drop_unread(calls: list, layers: list, outputs: set[int]) -> tuple[list, list]:
    """``calls`` and ``layers`` without the layers none of whose outputs is read (by a kept
    layer or as a network output), as TensorRT's builder removes dead layers."""
    keep = [True] * len(calls)
    needed = set(outputs)
    for k in range(len(calls) - 1, -1, -1):
        _fn, ins, _attrs, outs = calls[k]
        if outs and not needed.intersection(outs) and layers[k].kind not in _SIDE_EFFECTS:
            keep[k] = False
            continue
        needed.update(ins)
    return ([c for c, kept in zip(calls, keep) if kept],
            [layer for layer, kept in zip(layers, keep) if kept])


def scaled_dot_product_attention(inputs, scale, masked_rows):
    """One fused attention (Note [Attention fusion]); ``masked_rows``: zero the rows whose
    mask is all -inf."""
    q, k, v, *rest = inputs
    mask = rest[0] if rest else None
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
    if masked_rows:
        out = torch.where(torch.isneginf(mask).all(-1, keepdim=True), 0.0, out)
    return (out,)


class _Graph:
    """Producers, readers and constant values of the slots of a list of calls."""

    def __init__(self, calls, layers, outputs, infos):
        self.calls, self.layers, self.outputs = calls, layers, outputs
        self.infos = dict(infos)  # slot -> TensorInfo: the network inputs, every output
        self.producer: dict[int, int] = {}
        self.readers: dict[int, list[int]] = {}
        for k, (_fn, ins, _attrs, outs) in enumerate(calls):
            for o, info in zip(outs, layers[k].outputs):
                self.producer[o], self.infos[o] = k, info
            for i in ins:
                self.readers.setdefault(i, []).append(k)
        self._values: dict[int, torch.Tensor | None] = {}

    def make(self, slot: int, kind: str, **attrs):
        """The layer index making ``slot`` when it is of ``kind`` with these attrs."""
        k = self.producer.get(slot)
        if k is None or self.layers[k].kind != kind:
            return None
        got = self.layers[k].attrs
        return k if all(got.get(a) == v for a, v in attrs.items()) else None

    def only_read_by(self, slot: int, *users: int) -> bool:
        return slot not in self.outputs and sorted(self.readers.get(slot, [])) == sorted(users)

    def value(self, slot: int) -> torch.Tensor | None:
        """The value of ``slot`` when only constants feed it (small layers, computed once)."""
        if slot not in self._values:
            self._values[slot] = None  # a guard against cycles while computing
            k = self.producer.get(slot)
            if k is not None and self.layers[k].kind in _FOLDABLE:
                fn, ins, attrs, outs = self.calls[k]
                args = [None if i == 0 else self.value(i) for i in ins]
                if all(a is not None for a, i in zip(args, ins) if i != 0):
                    self._values[slot] = fn(args, **attrs)[outs.index(slot)]
        return self._values[slot]

    def scalar(self, slot: int) -> float | None:
        v = self.value(slot)
        return float(v.reshape(()).item()) if v is not None and v.numel() == 1 else None


def _either(graph: _Graph, k: int, test) -> tuple[int, int] | None:
    """(the input slot of call ``k`` that passes ``test``, the other one)."""
    a, b = graph.calls[k][1]
    return (a, b) if test(a) else (b, a) if test(b) else None


def _match(graph: _Graph, final: int):
    """The fused call replacing the pattern whose last layer (the outer SELECT) is
    ``final``, and the layers it replaces; None where the pattern does not hold."""
    g, layers = graph, graph.layers
    zero = lambda s: g.scalar(s) == 0.0  # noqa: E731
    cond, then, o = g.calls[final][1]
    if not zero(then):
        return None
    mm_o = g.make(o, "MATRIX_MULTIPLY", op0="NONE", op1="NONE")
    if mm_o is None or not g.only_read_by(o, final):
        return None
    p, v = g.calls[mm_o][1]
    div = g.make(p, "ELEMENTWISE", op="DIV")
    if div is None or not g.only_read_by(p, mm_o):
        return None
    e, total = g.calls[div][1]
    rank = len(layers[div].outputs[0].shape)
    last = 1 << (rank - 1)
    red_sum = g.make(total, "REDUCE", op="SUM", axes=last, keep_dims=True)
    exp = g.make(e, "UNARY", op="EXP")
    if rank != 4 or red_sum is None or exp is None or g.calls[red_sum][1] != (e,) or \
            not g.only_read_by(total, div) or not g.only_read_by(e, red_sum, div):
        return None
    (d,) = g.calls[exp][1]
    sub = g.make(d, "ELEMENTWISE", op="SUB")
    if sub is None or not g.only_read_by(d, exp):
        return None
    x, shifted = g.calls[sub][1]
    safe = g.make(shifted, "SELECT")
    if safe is None or not g.only_read_by(shifted, sub):
        return None
    cond2, then2, m = g.calls[safe][1]
    red_max = g.make(m, "REDUCE", op="MAX", axes=last, keep_dims=True)
    equal = g.make(cond, "ELEMENTWISE", op="EQUAL")
    if cond2 != cond or not zero(then2) or red_max is None or equal is None or \
            g.calls[red_max][1] != (x,) or not g.only_read_by(cond, safe, final):
        return None
    pair = _either(g, equal, lambda s: s == m)
    if pair is None or g.scalar(pair[1]) != -math.inf or not g.only_read_by(m, equal, safe):
        return None
    replaced = [final, mm_o, div, red_sum, exp, sub, safe, red_max, equal]
    if not g.only_read_by(x, red_max, sub):
        return None
    mask, scaled = None, x
    add = g.make(x, "ELEMENTWISE", op="SUM")
    if add is not None:
        pair = _either(g, add, lambda s: g.make(s, "ELEMENTWISE", op="PROD") is not None)
        if pair is None or not g.only_read_by(pair[0], add):
            return None
        scaled, mask = pair
        replaced.append(add)
    prod = g.make(scaled, "ELEMENTWISE", op="PROD")
    if prod is None:
        return None
    pair = _either(g, prod, lambda s: g.make(s, "MATRIX_MULTIPLY", op0="NONE",
                                              op1="TRANSPOSE") is not None)
    scale = None if pair is None else g.scalar(pair[1])
    if scale is None or not g.only_read_by(pair[0], prod):
        return None
    mm_s = g.producer[pair[0]]
    q, k = g.calls[mm_s][1]
    replaced += [prod, mm_s]
    dtype = layers[final].outputs[0].dtype
    slots = [q, k, v] + ([] if mask is None else [mask])
    if not (isinstance(dtype, torch.dtype) and dtype.is_floating_point) or any(
            s not in g.infos or g.infos[s].dtype != dtype or len(g.infos[s].shape) != 4
            for s in slots):
        return None
    masked_rows = mask is not None
    known = None if mask is None else g.value(mask)
    if known is not None:
        if not torch.isneginf(known).all(-1).any():
            masked_rows = False
        if not known.any():  # all zeros: no mask at all
            slots, masked_rows = slots[:3], False
    call = (scaled_dot_product_attention, tuple(slots),
            {"scale": scale, "masked_rows": masked_rows}, g.calls[final][3])
    return call, replaced


def fuse_attention(calls: list, layers: list, outputs: set[int],
                   inputs: dict) -> tuple[list, list]:
    """``calls`` with each attention pattern (Note [Attention fusion]) as one call at the
    place of its last layer; the layers it no longer needs dropped. ``inputs``: the
    TensorInfo of each network input's slot. Returns the calls and the layer whose outputs
    each writes."""
    calls, layers = drop_unread(calls, layers, outputs)
    graph = _Graph(calls, layers, outputs, inputs)
    fused, replaced = {}, set()
    for k, layer in enumerate(layers):
        if layer.kind == "SELECT" and len(calls[k][1]) == 3:
            found = _match(graph, k)
            if found is not None and not replaced.intersection(found[1]):
                fused[k] = found[0]
                replaced.update(i for i in found[1] if i != k)
    if not fused:
        return calls, layers
    kept = [k for k in range(len(calls)) if k not in replaced]
    return drop_unread([fused.get(k, calls[k]) for k in kept], [layers[k] for k in kept],
                       outputs)
