"""Where an engine's weights live under weight streaming (the peer's
``enable_weight_streaming``; the user's context is ``runtime/streaming.py``): at most
``budget`` bytes of an engine's weights stay on its device, the rest live in host
memory and are copied to the device for the one call that reads them.

Note [Which weights stream]: the replayed calls are taken in execution order and each
call's weights stay resident while they fit in what is left of the budget (first fit);
the others stream. A weight read by several calls counts once, where it is first read.
The math is unchanged (a copy is exact), so outputs are bit-identical at every budget;
what changes is where the bytes live: ``resident_bytes`` <= budget on the device, plus
during a call the one streamed layer's weights. On a CPU device the host and the device
are one memory: the copies still happen (and are counted), the footprint does not shrink.
"""

from __future__ import annotations

import torch


def _host(tensor: torch.Tensor) -> torch.Tensor:
    out = tensor.to("cpu")
    return out.pin_memory() if torch.cuda.is_available() else out


def _tensors(attrs: dict) -> list[torch.Tensor]:
    return [v for v in attrs.values() if isinstance(v, torch.Tensor)]


def streamable_bytes(prepared) -> int:
    """Bytes of the weights the replayed calls read (each tensor once)."""
    seen: dict[int, torch.Tensor] = {}
    for _, _, attrs, _ in prepared.fast:
        seen.update((id(t), t) for t in _tensors(attrs))
    return sum(t.numel() * t.element_size() for t in seen.values())


class StreamPlan:
    """Which replayed calls of ``runner`` (a ``ReferenceRunner``) stream their weights,
    placed accordingly; ``attrs_for`` is the hook ``_Prepared.run`` calls per call."""

    def __init__(self, runner, budget: int):
        self.budget = int(budget)
        self.device = runner.device or torch.device("cpu")
        seen: set[int] = set()
        self.sizes: list[int] = []
        for _, _, attrs, _ in runner.prepared.fast:
            new = [t for t in _tensors(attrs) if id(t) not in seen]
            seen.update(id(t) for t in new)
            self.sizes.append(sum(t.numel() * t.element_size() for t in new))
        self.total_bytes = sum(self.sizes)
        left, streamed = self.budget, set()
        for k, size in enumerate(self.sizes):
            if size <= left:
                left -= size
            elif size:
                streamed.add(k)
        self.streamed = frozenset(streamed)
        self.resident_bytes = self.budget - left
        self.streamed_bytes = self.total_bytes - self.resident_bytes
        self.copied_bytes = 0  # host -> device bytes copied so far
        self.calls = 0
        place(runner, self.streamed)

    def attrs_for(self, k: int, attrs: dict) -> dict:
        """The attributes call ``k`` runs with: its host weights copied to the device."""
        if k == 0:
            self.calls += 1
        if k not in self.streamed:
            return attrs
        out = {}
        for key, value in attrs.items():
            if isinstance(value, torch.Tensor):
                # a real copy even where host and device are one memory (Note [Which
                # weights stream])
                value = value.to(self.device, non_blocking=True, copy=True)
                self.copied_bytes += value.numel() * value.element_size()
            out[key] = value
        return out


def place(runner, streamed: frozenset[int]) -> None:
    """Move the weights of the ``streamed`` calls to host memory and the others to the
    runner's device, in the snapshot's layers and in the prepared calls alike (one tensor
    object per weight, so nothing keeps a second copy on the device)."""
    device = runner.device or torch.device("cpu")
    moved: dict[int, torch.Tensor] = {}
    for k, (_, _, attrs, _) in enumerate(runner.prepared.fast):
        for t in _tensors(attrs):
            if id(t) in moved:  # placed where it is first read
                continue
            target = torch.device("cpu") if k in streamed else device
            moved[id(t)] = t if t.device == target else (
                _host(t) if k in streamed else t.to(target))
    tables = [layer.attrs for layer in runner.snapshot.layers]
    tables += [attrs for _, _, attrs, _ in runner.prepared.fast]
    tables += [attrs for _, _, attrs, _ in runner.prepared.calls]
    for table in tables:
        for key, value in list(table.items()):
            if isinstance(value, torch.Tensor) and id(value) in moved:
                table[key] = moved[id(value)]
