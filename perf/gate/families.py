"""The converter families and their one-op graphs (the conformance cases of each family,
lowered once, fp32, static): what the family micro-benchmarks convert.

Each case has an id (its module, its place there and its op), the same in every tree the
gate measures: the cases are this checkout's, the library is the tree's. A base commit's
library may lack what a newer case module imports; that module is skipped there (named in
``SKIPPED``) and the A/B of a family converts only the cases both trees built
(perf/gate/confirm.py), so both sides do the same work."""

from __future__ import annotations

import importlib

import torch

from conformance.runner import OneOp, case_modules
from torch_trt_ref.capture import export_program
from torch_trt_ref.compiler import lower_program
from torch_trt_ref.conversion.registry import CONVERTERS
from torch_trt_ref.conversion.shapes import spec_from_fake
from torch_trt_ref.settings import CompilationSettings, op_name

CASES_PER_FAMILY = 12
# SymInt arithmetic only exists between dynamic dims: it has no static one-op graph.
DYNAMIC_ONLY_FAMILIES = {"python_ops"}


def _cases() -> tuple[list[tuple[str, object]], dict[str, str]]:
    """([(case id, case)], {module: why it could not be imported by this library})."""
    found, skipped = [], {}
    for name in case_modules():
        short = name.rsplit(".", 1)[-1]
        try:
            module = importlib.import_module(name)
        except ImportError as err:
            skipped[short] = f"{type(err).__name__}: {err}"
            continue
        found += [(f"{short}[{i}]:{op_name(case.target)}", case)
                  for i, case in enumerate(getattr(module, "CASES", []))]
    return found, skipped


def _families() -> tuple[dict[str, list], dict[str, str]]:
    by_family: dict[str, list] = {}
    found, skipped = _cases()
    for case_id, case in found:
        supports = CONVERTERS.candidates(case.target)
        if supports and not case.xfail and supports[0].family not in DYNAMIC_ONLY_FAMILIES:
            by_family.setdefault(supports[0].family, []).append((case_id, case))
    return {f: cases[:CASES_PER_FAMILY] for f, cases in sorted(by_family.items())}, skipped


FAMILIES, SKIPPED = _families()


def graphs(cases) -> list:
    """[(case id, lowered one-op graph (fp32, static), its input specs)] of ``cases``
    ([(case id, case)]); a case that does not lower statically is left out."""
    settings = CompilationSettings()
    out = []
    for case_id, case in cases:
        module = OneOp(case, torch.float32)
        args = tuple(a.make(torch.float32, seed=i)
                     for i, (_, a) in enumerate(case.tensor_args()) if type(a).__name__ == "T")
        try:
            gm = lower_program(export_program(module, args, {}, None), settings)
        except Exception:  # a case that needs dynamic inputs or special values
            continue
        specs = [spec_from_fake(n.name, n.meta["val"], {})
                 for n in gm.graph.nodes if n.op == "placeholder"]
        out.append((case_id, gm, specs))
    return out
