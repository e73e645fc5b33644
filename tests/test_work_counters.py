"""torch_trt_ref.work: the exact work counters the regression gate reads (FX nodes after
each lowering pass, partitioner steps) count a compile only inside ``counting()``."""

from __future__ import annotations

import torch

import torch_trt_ref
from torch_trt_ref import work
from torch_trt_ref.lowering.pipeline import PASSES


class _Small(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x):
        return torch.relu(self.fc(x)) + 1.0


def test_counts_one_compile_and_nothing_outside():
    x = torch.randn(2, 8)
    with work.counting() as counts:
        compiled = torch_trt_ref.compile(_Small().eval(), (x,), min_block_size=1)
    expected = {"nodes.decomposed", *(f"nodes.{p.__name__}" for p in PASSES),
                "partition.capability_checks", "partition.rounds", "partition.units",
                "partition.strategy_segments"}
    assert expected <= set(counts)
    assert counts["partition.rounds"] == 1
    support = compiled.compile_report.support
    assert counts["partition.capability_checks"] == support["n_total"]
    before = dict(counts)
    work.add("nodes.decomposed", 5)  # outside counting(): nothing to count into
    assert counts == before
    with work.counting() as again:
        pass
    assert not again
