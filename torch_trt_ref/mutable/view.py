"""The weights a ``MutableModule`` compiles: the wrapped model's state dict with every LoRA
layer (peft's, found by its attributes: no peft import) seen as its base layer holding the
merged weight, and a cheap fingerprint per entry to notice that a weight changed.

Note [LoRA as weights]: a peft LoRA layer computes ``base(x) + sum_a scale_a * B_a(A_a(x))``
over its active adapters that are not merged yet. Compiled as is, every adapter swap changes
the graph (it reads other parameters), so every swap would rebuild the engines. Compiled as
its base layer holding ``W + sum_a delta_a`` (peft's own ``get_delta_weight``, the sum
peft's ``merge`` adds in place), the graph is the base model's and a swap changes one weight
per LoRA layer: a refit of the engines holding those weights. The compiled model is a copy
of the base model with each LoRA layer replaced by its base layer (``plain_copy``); its
state-dict names are the base model's (``q_proj.weight``, not ``q_proj.base_layer.weight``).
"""

from __future__ import annotations

import copy
from typing import Any

import torch


def base_model(model: torch.nn.Module) -> torch.nn.Module:
    """The model whose forward is compiled: a peft ``PeftModel``'s base model (with the
    LoRA layers in it), else ``model`` itself."""
    getter = getattr(model, "get_base_model", None)
    return getter() if callable(getter) else model


def is_lora_layer(module: torch.nn.Module) -> bool:
    return all(hasattr(module, a) for a in ("base_layer", "get_delta_weight",
                                            "merged_adapters", "active_adapters"))


def lora_layers(model: torch.nn.Module) -> dict[str, torch.nn.Module]:
    """path -> LoRA layer of ``model`` (outermost ones; a LoRA layer's own submodules are
    not searched)."""
    found: dict[str, torch.nn.Module] = {}
    for path, module in model.named_modules():
        if is_lora_layer(module) and not any(path.startswith(p + ".") for p in found):
            _check_supported(path, module)
            found[path] = module
    return found


def _check_supported(path: str, layer: torch.nn.Module) -> None:
    for flag in ("use_dora", "lora_bias"):
        table = getattr(layer, flag, {}) or {}
        used = [a for a in layer.active_adapters if table.get(a)]
        if used:
            raise NotImplementedError(
                f"{path}: adapter(s) {used} use {flag}; a MutableModule merges LoRA adapters "
                f"as W + get_delta_weight(), which {flag} is not. Accepted: plain LoRA "
                f"adapters (LoraConfig without {flag}), or merge_and_unload() first")


def _active_unmerged(layer: torch.nn.Module) -> list[str]:
    if getattr(layer, "disable_adapters", False):
        return []
    return [a for a in layer.active_adapters
            if a not in layer.merged_adapters and a in getattr(layer, "scaling", {a: 0})]


def _key(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _entries(model: torch.nn.Module) -> dict[str, tuple[torch.Tensor, Any]]:
    """Compiled-model key -> (live tensor, LoRA layer or None) in ``state_dict`` order."""
    lora = lora_layers(model)
    out: dict[str, tuple[torch.Tensor, Any]] = {}
    for key, tensor in model.state_dict(keep_vars=True).items():
        owner = next((p for p in lora if key.startswith(p + ".")), None)
        if owner is None:
            out[key] = (tensor, None)
            continue
        rest = key[len(owner) + 1:]
        if rest.startswith("base_layer."):
            name = rest.removeprefix("base_layer.")
            out[_key(owner, name)] = (tensor, lora[owner] if name == "weight" else None)
    return out


def signatures(model: torch.nn.Module) -> dict[str, tuple]:
    """Compiled-model key -> what its value depends on, cheaply: the identity and version
    counter of every tensor it is computed from (an assignment changes the identity, an
    in-place write such as ``load_state_dict`` the version) and, for a LoRA weight, the
    active unmerged adapters with their scales. Equal signatures: the value has not
    changed. Shape and dtype are part of it (the structure)."""
    out = {}
    for key, (tensor, layer) in _entries(model).items():
        sig = (tuple(tensor.shape), tensor.dtype, id(tensor), tensor._version)
        if layer is not None:
            sig += tuple((a, layer.scaling[a], *_adapter_versions(layer, a))
                         for a in _active_unmerged(layer))
        out[key] = sig
    return out


def _adapter_versions(layer: torch.nn.Module, adapter: str) -> tuple:
    tensors = [p for name, p in layer.named_parameters() if f".{adapter}." in f".{name}."]
    return tuple((id(t), t._version) for t in tensors)


def value(model: torch.nn.Module, key: str) -> torch.Tensor:
    """The compiled-model entry ``key`` as the live model computes it now: for a LoRA
    layer's weight, base weight + peft's delta of each active unmerged adapter."""
    tensor, layer = _entries(model)[key]
    return _merged(tensor, layer)


def _merged(tensor: torch.Tensor, layer) -> torch.Tensor:
    with torch.no_grad():
        out = tensor.detach()
        for adapter in ([] if layer is None else _active_unmerged(layer)):
            out = out + layer.get_delta_weight(adapter).to(out.dtype)
        return out


def values(model: torch.nn.Module, keys=None) -> dict[str, torch.Tensor]:
    """Every compiled-model entry (or those in ``keys``) as the live model computes it."""
    return {k: _merged(t, layer) for k, (t, layer) in _entries(model).items()
            if keys is None or k in keys}


def structure(model: torch.nn.Module) -> tuple:
    """The module tree of the compiled model: (path, type) per module, LoRA layers seen as
    their base layer. A change here (a swapped module) means a recompile."""
    lora = lora_layers(model)
    out = []
    for path, module in model.named_modules():
        inside = [p for p in lora if path.startswith(p + ".")]
        if inside:
            owner = inside[0]
            if path == _key(owner, "base_layer"):
                out.append((owner, type(module).__qualname__))
            continue
        if path not in lora:
            out.append((path, type(module).__qualname__))
    return tuple(out)


def plain_copy(model: torch.nn.Module) -> torch.nn.Module:
    """``model`` with every LoRA layer replaced by its base layer holding the merged weight
    (Note [LoRA as weights]); ``model`` itself when it has no LoRA layer. The modules are
    copied, the tensors shared (the compile copies what it keeps). The copy's state-dict
    keys are the keys ``values`` returns."""
    lora = lora_layers(model)
    if not lora:
        return model
    memo = {id(t): t for t in [*model.parameters(), *model.buffers()]}
    clone = copy.deepcopy(model, memo)
    for path, layer in lora.items():
        base = copy.copy(layer.base_layer)
        base._parameters = dict(base._parameters)
        base._parameters["weight"] = torch.nn.Parameter(
            _merged(layer.base_layer.weight, layer), requires_grad=False)
        parent, _, child = path.rpartition(".")
        setattr(clone.get_submodule(parent) if parent else clone, child, base)
    return clone
