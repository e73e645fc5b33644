"""The converter families and their one-op graphs (the conformance cases of each family,
lowered once, fp32, static): what the family micro-benchmarks convert."""

from __future__ import annotations

import torch

from conformance.runner import OneOp, all_cases
from torch_trt_ref.capture import export_program
from torch_trt_ref.compiler import lower_program
from torch_trt_ref.conversion.registry import CONVERTERS
from torch_trt_ref.conversion.shapes import spec_from_fake
from torch_trt_ref.settings import CompilationSettings

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


def graphs(cases) -> list:
    """Lowered one-op graphs (fp32, static) with their input specs."""
    settings = CompilationSettings()
    out = []
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
        out.append((gm, specs))
    return out
