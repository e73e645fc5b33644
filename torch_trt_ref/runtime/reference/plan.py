"""The executor's plan of a network: its flat layer list grouped into steps — plain layers,
and loops and conditionals (``Region``) that hold their own steps — ordered so that every
tensor is made before it is read."""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Union

from ..snapshot import LayerRecord

# Boundary layer kind -> the attribute naming its loop or conditional (snapshot attrs).
BOUNDARY = {
    "TRIP_LIMIT": "loop", "RECURRENCE": "loop", "ITERATOR": "loop", "LOOP_OUTPUT": "loop",
    "CONDITION": "conditional", "CONDITIONAL_INPUT": "conditional",
    "CONDITIONAL_OUTPUT": "conditional",
}
# Boundary layers whose outputs are inside their region.
ENTRIES = ("RECURRENCE", "ITERATOR", "CONDITIONAL_INPUT")


@dataclass
class Region:
    kind: str  # "loop" or "conditional"
    name: str
    boundary: dict[str, list[LayerRecord]]  # boundary layers by layer kind
    # loop: "head" (what its WHILE limits read) and "body"; conditional: "then", "else"
    steps: dict[str, list[Step]]
    layers: list[LayerRecord] = field(default_factory=list)  # all of it, nested included


Step = Union[LayerRecord, Region]


# Note [Loop and branch membership]: TensorRT marks only the boundary layers of a loop or
# conditional (their getLoop()/getConditional()); interior layers are whatever the network
# wires between them ("Interior layers are free to use tensors defined inside or outside
# the loop"). The plan takes as interior every layer that reads, directly or not, an output
# of the region's RECURRENCE, ITERATOR or CONDITIONAL_INPUT layers; a nested loop or
# conditional reached that way joins whole. A layer that reads only outside tensors
# computes the same value in every iteration and branch, so it runs once, outside: for a
# conditional this means such a layer runs whichever branch is taken (it could only
# differ from TensorRT by raising an error the untaken branch would never have raised).
def plan(layers: list[LayerRecord]) -> list[Step]:
    """Steps running ``layers`` (a network's, or a region's interior) in a valid order."""
    regions = _regions(layers)
    if not regions and _in_order(layers):  # the common case, kept cheap: no regrouping
        return list(layers)
    boundary_of = {id(b): bs for bs in regions.values() for b in bs}
    consumers: dict[str, list[LayerRecord]] = {}
    for layer in layers:
        for name in layer.inputs:
            consumers.setdefault(name, []).append(layer)
    interiors = {key: _interior(bs, consumers, boundary_of) for key, bs in regions.items()}
    nested = {i for interior in interiors.values() for i in interior}
    units: list[Step] = [layer for layer in layers
                         if id(layer) not in nested and layer.kind not in BOUNDARY]
    for key, bs in regions.items():
        if id(bs[0]) not in nested:
            inside = [layer for layer in layers if id(layer) in interiors[key]]
            units.append(_region(*key, bs, inside))
    position = {id(layer): i for i, layer in enumerate(layers)}
    units.sort(key=lambda unit: position[id(_layers(unit)[0])])
    return _order(units)


def _regions(layers) -> dict[tuple[str, str], list[LayerRecord]]:
    regions: dict[tuple[str, str], list[LayerRecord]] = {}
    for layer in layers:
        attr = BOUNDARY.get(layer.kind)
        if attr is not None:
            regions.setdefault((attr, layer.attrs[attr]), []).append(layer)
    return regions


def _interior(boundary, consumers, boundary_of) -> set[int]:
    """Ids of the layers reading, directly or not, the region's entry outputs."""
    own = {id(b) for b in boundary}
    inside: set[int] = set()
    todo = [b for b in boundary if b.kind in ENTRIES]
    while todo:
        for info in todo.pop().outputs:
            for user in consumers.get(info.name, ()):
                for layer in boundary_of.get(id(user), [user]):
                    if id(layer) not in own and id(layer) not in inside:
                        inside.add(id(layer))
                        todo.append(layer)
    return inside


def _region(kind: str, name: str, boundary, inside) -> Region:
    """A loop's or conditional's steps: the interior layers each part needs, planned."""
    by_kind: dict[str, list[LayerRecord]] = {}
    for layer in boundary:
        by_kind.setdefault(layer.kind, []).append(layer)
    # At most one COUNT and one WHILE limit per loop, one CONDITION per conditional: more
    # means two regions share a name, which is all the snapshot tells them apart by.
    singles = [t.attrs["kind"] for t in by_kind.get("TRIP_LIMIT", [])] if kind == "loop" \
        else [c.kind for c in by_kind.get("CONDITION", [])]
    if len(singles) != len(set(singles)):
        raise ValueError(f"{kind} {name!r} has boundary layers {sorted(singles)}: two "
                         f"{kind}s share that name; give them unique names")
    if kind == "loop":
        head = _needed([t.inputs[0] for t in by_kind.get("TRIP_LIMIT", [])
                        if t.attrs["kind"] == "WHILE"], inside)
        in_head = {id(layer) for layer in head}
        rest = [layer for layer in inside if id(layer) not in in_head]
        body = _needed([o.inputs[0] for o in by_kind.get("LOOP_OUTPUT", [])]
                       + [r.inputs[1] for r in by_kind.get("RECURRENCE", [])], rest)
        steps = {"head": plan(head), "body": plan(body)}
    else:
        outputs = by_kind.get("CONDITIONAL_OUTPUT", [])
        steps = {branch: plan(_needed([o.inputs[i] for o in outputs], inside))
                 for i, branch in enumerate(("then", "else"))}
    return Region(kind, name, by_kind, steps, [*boundary, *inside])


def _needed(names, layers) -> list[LayerRecord]:
    """The layers of ``layers`` that the tensors ``names`` depend on, in order; a nested
    loop or conditional comes whole."""
    producer = {info.name: layer for layer in layers for info in layer.outputs}
    regions = _regions(layers)
    found: set[int] = set()
    todo = list(names)
    while todo:
        layer = producer.get(todo.pop())
        if layer is None or id(layer) in found:
            continue
        attr = BOUNDARY.get(layer.kind)
        for member in regions[(attr, layer.attrs[attr])] if attr else [layer]:
            found.add(id(member))
            todo.extend(name for name in member.inputs if name is not None)
    return [layer for layer in layers if id(layer) in found]


def _in_order(layers) -> bool:
    """Whether every layer comes after the layers making its inputs."""
    made: set[str | None] = {None}
    producers = {info.name for layer in layers for info in layer.outputs}
    for layer in layers:
        for name in layer.inputs:
            if name not in made and name in producers:
                return False
        for info in layer.outputs:
            made.add(info.name)
    return True


def _layers(unit: Step) -> list[LayerRecord]:
    return unit.layers if isinstance(unit, Region) else [unit]


def _order(units: list[Step]) -> list[Step]:
    """Topological order of ``units``, keeping their given order where the wiring allows
    (layers are usually added in order, but an invariant layer added inside a loop can
    come after the loop's first boundary layer)."""
    made = {info.name: i for i, unit in enumerate(units)
            for layer in _layers(unit) for info in layer.outputs}
    users: list[list[int]] = [[] for _ in units]
    waiting = [0] * len(units)
    for i, unit in enumerate(units):
        for j in {made[n] for layer in _layers(unit) for n in layer.inputs if n in made} - {i}:
            users[j].append(i)
            waiting[i] += 1
    ready = [i for i, count in enumerate(waiting) if count == 0]
    order = []
    while ready:
        i = heapq.heappop(ready)
        order.append(units[i])
        for k in users[i]:
            waiting[k] -= 1
            if waiting[k] == 0:
                heapq.heappush(ready, k)
    if len(order) != len(units):
        raise ValueError("the network's layers form a cycle outside a loop's recurrence")
    return order
