"""Which sizes of an FX node are symbolic (``has_dynamic_shapes``) or data-dependent
(``unbacked_symbols``, and the nodes that ``makers`` of them): what the capability question
(``ConverterRegistry.select``) asks of a node before its validator."""

from __future__ import annotations

from typing import Any

import torch
from torch.fx import Node
from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

from ..weights import untraced


def _fake_values(node: Node) -> list[Any]:
    vals = [node.meta.get("val")] + [a.meta.get("val") for a in node.all_input_nodes]
    flat = []
    for v in vals:
        flat.extend(v if isinstance(v, (tuple, list)) else [v])
    return flat


# Note [Data-dependent sizes]: an unbacked symbol (u0, u1, ...) is a size torch.export
# cannot know before running the model: the row count of nonzero, the length after boolean
# indexing, a size read with .item(). TensorRT needs a range for every dynamic dim of an
# engine input, and an unbacked symbol has none (its range is 0..inf), so a segment that
# takes such a tensor always failed at conversion ("cannot bound dimension u0") and fell
# back with a warning. The capability check now says so up front: a node whose values have
# unbacked sizes runs in PyTorch unless its converter declares ``unbacked=True``; a
# converter with an output allocator may make new ones (its own output), not read them.

def unbacked_symbols(node: Node) -> tuple[set, set]:
    """The unbacked symbols in the sizes of ``node``'s inputs, and those only its own
    output has (the ones it makes). Note [Data-dependent sizes]."""

    read: set = set()
    for arg in node.all_input_nodes:
        read |= _size_symbols(arg.meta.get("val"))
    return read, _size_symbols(node.meta.get("val")) - read


def _size_symbols(value) -> set:
    """Unbacked symbols in the sizes of a value (tensors' shapes, SymInts), not in strides
    or storage offsets: ``select(x, 0, s0 - 2)`` under size-oblivious tracing gets an
    unbacked storage offset but a shape TensorRT can build for."""
    if isinstance(value, (tuple, list)):
        return set().union(*map(_size_symbols, value)) if value else set()
    if isinstance(value, torch.Tensor):
        return free_unbacked_symbols(tuple(value.shape))
    return free_unbacked_symbols(value)


def makers(node: Node, symbols: set) -> list[str]:
    """Names of the nodes that made ``symbols`` (their ``unbacked_bindings``), found by
    walking up the inputs that carry them."""

    found, seen, todo = [], set(), [node]
    while todo and len(seen) < 10_000:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        if set(n.meta.get("unbacked_bindings") or ()) & symbols:
            found.append(n.name)
            continue
        todo += [a for a in n.all_input_nodes if _size_symbols(a.meta.get("val")) & symbols]
    return sorted(found)


def has_dynamic_shapes(node: Node) -> bool:
    """True if any input or output of ``node`` has a symbolic dimension. (Reads of FakeTensor
    shapes: Note [Metadata reads skip the weight tracer].)"""
    with untraced():
        for v in _fake_values(node):
            if isinstance(v, torch.Tensor) and any(not isinstance(d, int) for d in v.shape):
                return True
            if isinstance(v, torch.SymInt):
                return True
    return False
