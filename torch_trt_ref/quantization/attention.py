"""Quantizers on attention's batched matmuls (``quantize(..., attention=True)``): both inputs
of Q·Kᵀ and of P·V get a per-tensor quantizer, as TensorRT's fused FP8/INT8 attention
expects (Q/DQ on q, k, v and on the softmax output P).

Attention is found by running the model once on the first calibration batch (Note
[Attention sites]); each module that calls ``scaled_dot_product_attention`` or a softmax
becomes a quantized attention module whose forward runs under a TorchFunctionMode that
replaces those calls by their quantized form. A fused SDPA call becomes one
``torch_trt_ref::quantized_sdpa`` op (attention_op.py) holding the four amax values; while
its quantizers calibrate (or are hooked, as the tie-aware oracle does) it runs as its math
with the quantizer modules instead, which is the op's own kernel arithmetic."""

from __future__ import annotations

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from .attention_op import QUANTIZED_SDPA, ROLES, sdpa_math
from .ops import FORMATS

_BITS = {name: bits for bits, name in FORMATS.items()}  # 'int8' -> (num_bits, exponent_bits)

SDPA = {nn.functional.scaled_dot_product_attention}
MATMUL = {torch.matmul, torch.Tensor.matmul, torch.Tensor.__matmul__, torch.bmm,
          torch.Tensor.bmm}
SOFTMAX = {nn.functional.softmax, torch.softmax, torch.Tensor.softmax}


def _kind(func) -> str | None:
    if func in SDPA:
        return "sdpa"
    if func in MATMUL:
        return "matmul"
    return "softmax" if func in SOFTMAX else None


class _Discover(TorchFunctionMode):
    """Records, per module on the module stack, the sequence of sdpa/matmul/softmax calls
    made in its subtree, and which module (the innermost) called each sdpa or softmax."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.stack: list[str] = []
        self.events: dict[str, list[tuple[str, bool]]] = {}
        self.owners: list[str] = []
        self.handles = []
        for name, module in model.named_modules():
            self.handles.append(module.register_forward_pre_hook(
                lambda m, a, name=name: self.stack.append(name)))
            self.handles.append(module.register_forward_hook(self._leave))

    def _leave(self, module, args, output) -> None:  # a hook returning None keeps the output
        self.stack.pop()

    def close(self) -> None:
        for handle in self.handles:
            handle.remove()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kind = _kind(func)
        if kind is not None and self.stack:
            activations = kind != "matmul" or not any(
                isinstance(a, nn.Parameter) for a in args[:2])
            for name in self.stack:
                self.events.setdefault(name, []).append((kind, activations))
            if kind != "matmul" and self.stack[-1] not in self.owners:
                self.owners.append(self.stack[-1])
        return func(*args, **(kwargs or {}))


# Note [Attention sites]: an owner module's calls are numbered in call order over its
# subtree (sdpa, matmul and softmax calls all count). An sdpa call is a site; in eager
# attention (``softmax(q @ k^T * s + mask) @ v``), the last matmul of two activations before
# a softmax is Q·Kᵀ and the first one after it is P·V. Matmuls of a module that calls no
# softmax (a rotary embedding's ``inv_freq @ positions``) are left alone. The numbering
# assumes the forward takes the same path for every input, as ``torch.export`` does.
def sites(events: list[tuple[str, bool]]) -> dict[int, str]:
    """{call index: 'sdpa' | 'matmul'} of the quantized calls in one owner's events."""
    found: dict[int, str] = {}
    for i, (kind, activations) in enumerate(events):
        if kind == "sdpa":
            found[i] = "sdpa"
        elif kind == "softmax":
            before = [j for j in range(i) if events[j] == ("matmul", True)]
            after = [j for j in range(i + 1, len(events)) if events[j][0] == "matmul"]
            if before:
                found[before[-1]] = "matmul"
            if after and events[after[0]][1]:
                found[after[0]] = "matmul"
    return found


class _Replace(TorchFunctionMode):
    """Runs an owner's forward: its sdpa sites become quantized attention, its matmul sites
    quantize both inputs; every other call runs as it was."""

    def __init__(self, owner: nn.Module):
        super().__init__()
        self.owner, self.count = owner, 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if _kind(func) is None:
            return func(*args, **kwargs)
        index = self.count
        self.count += 1
        site = self.owner.attention_sites.get(index)
        found = self.owner.attention_quantizers
        if site == "sdpa":
            return quantized_sdpa({r: found[f"sdpa{index}_{r}"] for r in ROLES}, *args,
                                  **kwargs)
        if site == "matmul":
            a, b = found[f"bmm{index}_a"](args[0]), found[f"bmm{index}_b"](args[1])
            return func(a, b, *args[2:], **kwargs)
        return func(*args, **kwargs)


def quantized_sdpa(quantizers, query, key, value, attn_mask=None, dropout_p=0.0,
                   is_causal=False, scale=None, enable_gqa=False):
    """scaled_dot_product_attention with quantized q, k, v and P (per tensor), the
    ``TensorQuantizer`` of each role in ``quantizers``: one ``torch_trt_ref::quantized_sdpa``
    op (Note [Quantized attention is one node]), or its math calling the quantizer modules
    while one of them calibrates or has a forward hook (``_unfused``)."""
    if _unfused(quantizers.values()):
        return sdpa_math(lambda role, x: quantizers[role](x), query, key, value, attn_mask,
                         dropout_p, is_causal, scale, enable_gqa)
    first = quantizers["q"]
    num_bits, exponent_bits = _BITS[first.precision]
    return QUANTIZED_SDPA(query, key, value, *(quantizers[r].amax for r in ROLES),
                          attn_mask, dropout_p, is_causal, scale, enable_gqa,
                          num_bits=num_bits, exponent_bits=exponent_bits,
                          narrow_range=first.precision == "int8")


def _unfused(quantizers) -> bool:
    """Whether a quantizer must run as a module: it records (calibration) or is hooked (the
    tie-aware oracle reads and flips each quantizer call's values, ties.py)."""
    return any(q.calibrator is not None or q._forward_hooks or q._forward_pre_hooks
               for q in quantizers)


class _QuantizedAttention:
    """Mixin of a module holding attention sites: its forward runs under ``_Replace``."""

    def forward(self, *args, **kwargs):
        with _Replace(self):
            return super().forward(*args, **kwargs)


_CLASSES: dict[type, type] = {}


def insert(model: nn.Module, batch_call, make_quantizer, skipped=lambda name: False
           ) -> list[str]:
    """Find the attention sites by running ``batch_call()`` once, turn each owner not
    ``skipped(name)`` into a quantized attention module with ``attention_quantizers`` (a
    ModuleDict of quantizers from ``make_quantizer()``); returns the owners' names."""
    discover = _Discover(model)
    try:
        with torch.no_grad(), discover:
            batch_call()
    finally:
        discover.close()
    modules = dict(model.named_modules())
    owners = []
    for name in discover.owners:
        found = sites(discover.events.get(name, []))
        if not found or skipped(name):
            continue
        module = modules[name]
        cls = type(module)
        if cls not in _CLASSES:
            _CLASSES[cls] = type(f"QuantAttention{cls.__name__}", (_QuantizedAttention, cls), {})
        module.__class__ = _CLASSES[cls]
        module.attention_sites = found
        roles = {"sdpa": "qkvp", "matmul": "ab"}
        prefix = {"sdpa": "sdpa", "matmul": "bmm"}
        module.attention_quantizers = nn.ModuleDict({
            f"{prefix[kind]}{i}_{r}": make_quantizer() for i, kind in found.items()
            for r in roles[kind]})
        owners.append(name)
    return owners
