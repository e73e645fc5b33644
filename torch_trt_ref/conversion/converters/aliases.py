"""Composite ops that are another op under a second name with the same schema (grid_sampler
is grid_sampler_2d/3d, clip is clamp): each reuses that op's converter and validator. The
default lowering decomposes them; these entries serve graphs that keep them
(``disabled_decompositions``)."""

from __future__ import annotations

from dataclasses import replace

import torch

from ..registry import CONVERTERS
from . import elementwise, resize  # noqa: F401  (registers the converters reused here)

aten = torch.ops.aten

ALIASES = {
    aten.grid_sampler.default: aten.grid_sampler_2d.default,
    aten.clip.default: aten.clamp.default,
    aten.clip.Tensor: aten.clamp.Tensor,
}


def _arguments(op) -> list[tuple[str, str]]:
    return [(a.name, str(a.type)) for a in op._schema.arguments]


def register_alias(alias, target, registry=CONVERTERS) -> None:
    """Register ``target``'s built-in converters for ``alias`` too; their schemas must
    agree, since converters take their arguments by name."""
    if _arguments(alias) != _arguments(target):
        raise TypeError(f"{alias} and {target} have different schemas")
    for support in list(registry.candidates(target)):
        registry.register(replace(support, target=alias))


for _alias, _target in ALIASES.items():
    register_alias(_alias, _target)
