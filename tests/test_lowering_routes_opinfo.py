"""The node-by-node lowering held to ``run_decompositions`` on one-op graphs made from
PyTorch's own OpInfo samples: every OpInfo whose op the decomposition table (or a composite
that cannot stay whole) covers is exported with up to three of its float32 samples, lowered
by both routes, and must give the same tensor ops and outputs within fp32 rounding."""

from __future__ import annotations

import os

import pytest
import torch

from conformance.opinfo import OpCall
from torch_trt_ref.capture import export_program
from torch_trt_ref.lowering import decomposition_table
from torch_trt_ref.lowering.decompositions import NotLocallyLowerable, _needs_decomposition
from torch_trt_ref.lowering.routes import assert_routes_agree
from torch_trt_ref.settings import CompilationSettings

SETTINGS = CompilationSettings()
TABLE = decomposition_table(SETTINGS)

# One sample per OpInfo in the default run; TORCH_TRT_REF_OPINFO=full takes three.
SAMPLES_PER_OP = 3 if os.environ.get("TORCH_TRT_REF_OPINFO") == "full" else 1
# Ops whose outputs are uninitialized memory: only shapes and dtypes can agree.
UNINITIALIZED = {"empty", "new_empty", "empty_like", "new_empty_strided", "empty_strided",
                 "empty_permuted"}


def _decomposed_names() -> set[str]:
    """aten op names the lowering decomposes: the table's, and composites that cannot stay
    whole (what ``_needs_decomposition`` answers for their overloads)."""
    names = {op._schema.name.split("::")[1] for op in TABLE}
    for qualified in torch._C._dispatch_get_registrations_for_dispatch_key(
            "CompositeImplicitAutograd"):
        name, _, overload = qualified.partition(".")
        if not name.startswith("aten::"):
            continue
        packet = getattr(torch.ops.aten, name[len("aten::"):], None)
        op = getattr(packet, overload or "default", None) if packet is not None else None
        if isinstance(op, torch._ops.OpOverload) and _needs_decomposition(op, TABLE):
            names.add(name[len("aten::"):])
    return names


def _opinfos():
    try:
        from torch.testing._internal.common_methods_invocations import op_db
    except ImportError as err:  # expecttest is a dev dependency
        raise RuntimeError(f"importing PyTorch's OpInfo database failed: {err}") from err
    names = _decomposed_names()
    for info in op_db:
        candidates = {info.aten_name, info.name, info.name.split(".")[-1]}
        if candidates & names and torch.float32 in info.supported_dtypes("cpu"):
            yield info


OPINFOS = {f"{o.name}.{o.variant_test_name}".rstrip("."): o for o in _opinfos()}


def _exported_samples(info):
    """(program, inputs) for up to SAMPLES_PER_OP samples whose captured graph has a node
    to decompose; samples torch.export cannot capture are passed over."""
    torch.manual_seed(0)
    found = []
    for sample in info.sample_inputs("cpu", torch.float32):
        module = OpCall(info, sample)
        inputs = list(module.example)
        if any(t.is_complex() or t.is_sparse for t in inputs):
            continue
        try:
            ep = export_program(module, tuple(inputs), {}, None)
        except Exception:  # export limitations are not lowering's concern
            continue
        if any(n.op == "call_function" and _needs_decomposition(n.target, TABLE)
               for n in ep.graph.nodes):
            found.append((ep, inputs))
        if len(found) == SAMPLES_PER_OP:
            break
    return found


@pytest.mark.parametrize("name", sorted(OPINFOS))
def test_node_by_node_lowering_equals_run_decompositions_on_opinfo_samples(name):
    info = OPINFOS[name]
    for ep, inputs in _exported_samples(info):
        try:
            assert_routes_agree(ep, SETTINGS, tuple(inputs), {},
                                compare_values=info.name not in UNINITIALIZED)
        except NotLocallyLowerable:
            continue  # the compile then takes run_decompositions itself: nothing to compare
