"""Composite ops that are another op under a second name with the same schema up to argument
names (grid_sampler is grid_sampler_2d/3d, clip is clamp, reshape is view, split is
split_copy / split_with_sizes): each reuses that op's converter and validator. The
default lowering decomposes them; these entries serve graphs that keep them
(``disabled_decompositions``)."""

from __future__ import annotations

from dataclasses import replace

import torch

from ..registry import CONVERTERS

aten = torch.ops.aten

# alias -> (target, renamed arguments: alias's name -> target's name)
ALIASES = {
    aten.grid_sampler.default: (aten.grid_sampler_2d.default, {}),
    aten.clip.default: (aten.clamp.default, {}),
    aten.clip.Tensor: (aten.clamp.Tensor, {}),
    aten.split.Tensor: (aten.split_copy.Tensor, {}),
    aten.split.sizes: (aten.split_with_sizes.default, {"split_size": "split_sizes"}),
    aten.reshape.default: (aten.view.default, {"shape": "size"}),
}


def _arguments(op, rename: dict | None = None) -> list[tuple[str, str]]:
    rename = rename or {}
    return [(rename.get(a.name, a.name), str(a.type)) for a in op._schema.arguments]


def _renaming(fn, rename: dict):
    def convert(ctx, *args, **kwargs):
        return fn(ctx, *args, **{rename.get(k, k): v for k, v in kwargs.items()})

    convert.__name__ = convert.__qualname__ = fn.__name__
    return convert


def register_alias(alias, target, rename: dict, registry=CONVERTERS) -> None:
    """Register ``target``'s built-in converters for ``alias`` too; their schemas must
    agree up to ``rename``, since converters take their arguments by name (validators
    read positions, which agree)."""
    if _arguments(alias, rename) != _arguments(target):
        raise TypeError(f"{alias} and {target} have different schemas")
    for support in list(registry.candidates(target)):
        fn = _renaming(support.implementation, rename) if rename else support.implementation
        registry.register(replace(support, target=alias, implementation=fn))


def register_aliases(registry=CONVERTERS) -> None:
    """Register every entry of ``ALIASES``; the package runs it once every converter module
    is imported (``converters/__init__.py``), so the reused converters are registered."""
    for alias, (target, rename) in ALIASES.items():
        register_alias(alias, target, rename, registry)
