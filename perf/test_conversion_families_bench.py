"""Conversion throughput per converter family: the interpreter alone (no builder) on the
one-op graphs of the conformance cases of each family, as layers and nodes per second
(in the benchmark's extra_info)."""

from __future__ import annotations

import pytest
import torch

from conformance.runner import OneOp, all_cases
from torch_trt_ref.capture import export_program
from torch_trt_ref.compiler import CONVERTERS, lower_program
from torch_trt_ref.conversion.interpreter import Interpreter
from torch_trt_ref.conversion.shapes import spec_from_fake
from torch_trt_ref.settings import CompilationSettings

from .conftest import pedantic

CASES_PER_FAMILY = 12
# SymInt arithmetic only exists between dynamic dims: it has no static one-op graph.
DYNAMIC_ONLY_FAMILIES = {"python_ops"}


def _families() -> dict[str, list]:
    by_family: dict[str, list] = {}
    for case in all_cases():
        supports = CONVERTERS.candidates(case.target)
        if supports and not case.xfail and supports[0].family not in DYNAMIC_ONLY_FAMILIES:
            by_family.setdefault(supports[0].family, []).append(case)
    return {f: cases[:CASES_PER_FAMILY] for f, cases in sorted(by_family.items())}


FAMILIES = _families()


def _graphs(cases) -> list:
    """Lowered one-op graphs (fp32, static) with their input specs; built once."""
    settings = CompilationSettings()
    graphs = []
    for case in cases:
        module = OneOp(case, torch.float32)
        args = tuple(a.make(torch.float32, seed=i)
                     for i, (_, a) in enumerate(case.tensor_args()) if type(a).__name__ == "T")
        try:
            gm = lower_program(export_program(module, args, {}, None), settings)
        except Exception:  # a case that needs dynamic inputs or special values
            continue
        specs = [spec_from_fake(n.name, n.meta["val"], {})
                 for n in gm.graph.nodes if n.op == "placeholder"]
        graphs.append((gm, specs))
    return graphs


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_conversion_throughput(benchmark, family):
    graphs = _graphs(FAMILIES[family])
    assert graphs, f"no convertible sample graph for family {family}"
    settings = CompilationSettings()

    def convert_all():
        layers = nodes = 0
        for gm, specs in graphs:
            network = Interpreter(gm, specs, settings).run()
            layers += network.net.num_layers
            nodes += sum(network.converters_used.values())
        return layers, nodes

    layers, nodes = pedantic(benchmark, convert_all, rounds=3, warmup_rounds=1)
    seconds = benchmark.stats.stats.min
    benchmark.extra_info.update({"family": family, "graphs": len(graphs), "layers": layers,
                                 "nodes": nodes, "layers_per_second": layers / seconds,
                                 "nodes_per_second": nodes / seconds})
