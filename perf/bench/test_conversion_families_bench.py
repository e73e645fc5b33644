"""Conversion throughput per converter family: the interpreter alone (no builder) on the
one-op graphs of the conformance cases of each family, as layers and nodes per second
(in the benchmark's extra_info)."""

from __future__ import annotations

import pytest

from torch_trt_ref.conversion.interpreter import Interpreter
from torch_trt_ref.settings import CompilationSettings

from ..gate.families import FAMILIES
from ..gate.families import graphs as _graphs
from .conftest import pedantic


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_conversion_throughput(benchmark, family):
    graphs = _graphs(FAMILIES[family])
    assert graphs, f"no convertible sample graph for family {family}"
    settings = CompilationSettings()

    def convert_all():
        layers = nodes = 0
        for _, gm, specs in graphs:
            network = Interpreter(gm, specs, settings).run()
            layers += network.net.num_layers
            nodes += sum(network.converters_used.values())
        return layers, nodes

    layers, nodes = pedantic(benchmark, convert_all, rounds=3, warmup_rounds=1)
    seconds = benchmark.stats.stats.min
    benchmark.extra_info.update({"family": family, "graphs": len(graphs), "layers": layers,
                                 "nodes": nodes, "layers_per_second": layers / seconds,
                                 "nodes_per_second": nodes / seconds})
