"""Small hand-written graphs: the lgamma graph of seed 000 (dependency-aware partitioning)
and a model that interleaves ops without a converter with convertible ones."""

from __future__ import annotations

import torch

from ..entry import ZooEntry, seeded, tolerances


class LgammaGraph(torch.nn.Module):
    """Seed 000: ``cat([lgamma(x), lgamma(y), lgamma(x / y), x + y, x * y])``. The greedy
    (fast) partitioner alternates TensorRT and PyTorch; dependency-aware groups them."""

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        add = x + y
        x_lgamma = torch.lgamma(x)
        mul = x * y
        y_lgamma = torch.lgamma(y)
        div = x / y
        div_lgamma = torch.lgamma(div)
        return torch.cat([x_lgamma, y_lgamma, div_lgamma, add, mul], 0)


class Unconvertible(torch.nn.Module):
    """Linear/activation blocks separated by ops we deliberately leave without a converter:
    a special function (``torch.special.i0``), an FFT that goes through complex numbers
    and ``lgamma``. Whatever the converter library grows, these stay in PyTorch."""

    def __init__(self, width: int = 64):
        super().__init__()
        self.fc1 = torch.nn.Linear(width, width)
        self.fc2 = torch.nn.Linear(width, width)
        self.fc3 = torch.nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.fc1(x))
        h = torch.special.i0(h * 0.1)
        h = torch.relu(self.fc2(h))
        h = torch.fft.rfft(h, dim=-1).abs()[..., : h.shape[-1] // 2]
        h = torch.cat([h, h], dim=-1)
        h = torch.tanh(self.fc3(h))
        return torch.lgamma(h + 2.0) + h


def _positive_pair():
    g = seeded()
    return (torch.rand(4, 8, generator=g) + 0.5, torch.rand(4, 8, generator=g) + 0.5), {}


def _features():
    return (torch.randn(2, 64, generator=seeded()),), {}


ENTRIES = [
    ZooEntry("lgamma_graph", LgammaGraph, _positive_pair, None, tolerances(),
             ("synthetic", "quick", "seed000"),
             "seed 000 graph: cat of lgamma(x), lgamma(y), lgamma(x/y), x+y, x*y",
             {"min_block_size": 1}),
    ZooEntry("unconvertible", Unconvertible, _features, None, tolerances(),
             ("synthetic", "unsupported"),
             "linear blocks interleaved with special.i0, rfft (complex) and lgamma",
             {"min_block_size": 1}),
]
