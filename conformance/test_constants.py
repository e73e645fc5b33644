"""The constant-input dimension (conformance/constants.py): each converter with every
tensor argument a constant, and with only the first one constant (the others network
inputs: "first_constant"). By default one cell per op (its first case with a static
variant); TORCH_TRT_REF_CONSTANTS=full runs one cell per case."""

from __future__ import annotations

import os

import pytest

from .case import W
from .constants import constant_cells, run_constant_cell
from .runner import all_cases

FULL = os.environ.get("TORCH_TRT_REF_CONSTANTS") == "full"
CELLS = constant_cells(all_cases(), per_op=not FULL)
# Gaps of the constant form only (a case's own xfails apply as well).
_MYELIN = ("TensorRT-RTX's builder (Myelin) fails on this layer when its data input is a "
           "constant; such a segment runs in PyTorch, with a warning")
_CACHE_INPUT = ("TensorRT's KV-cache update layer writes its cache input in place (the output "
                "shares its memory), so the cache must be a network input; a constant cache "
                "is refused by the converter with an error naming it")
XFAIL: dict[str, str] = {
    "aten.convolution.default-transposed_grouped_dilated-fp32-constant": _MYELIN,
    "aten.eq.Scalar-bool-bool-constant": _MYELIN,
    "torch_trt_ref.kv_cache_update.default-decode-fp32-constant": _CACHE_INPUT,
    "torch_trt_ref.kv_cache_update.default-decode-fp32-first_constant": _CACHE_INPUT,
}


def _param(cell_id, case, dtype, mixed=False):
    reason = XFAIL.get(cell_id) or case.xfail_reason(dtype, False)
    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
    return pytest.param(case, dtype, mixed, id=cell_id, marks=marks)


# the first tensor argument a constant, the others network inputs (cases with >= 2)
MIXED = [(cell_id.replace("-constant", "-first_constant"), case, dtype)
         for cell_id, case, dtype in CELLS
         if sum(not isinstance(a, W) for _, a in case.tensor_args()) >= 2]


@pytest.mark.parametrize("case,dtype,mixed", [_param(*c) for c in CELLS]
                         + [_param(*c, mixed=True) for c in MIXED])
def test_constant_inputs(case, dtype, mixed, request):
    try:
        run_constant_cell(case, dtype, mixed=mixed)
    except BaseException as err:
        env = "TORCH_TRT_REF_CONSTANTS=full " if FULL else ""
        command = (f'{env}python -m pytest "conformance/test_constants.py::'
                   f'test_constant_inputs[{request.node.callspec.id}]"')
        raise AssertionError(f"{type(err).__name__}: {err}\nreproduce: {command}") from err


def test_the_constant_dimension_covers_every_converter_with_a_static_case():
    ops = {cell_id.split("-")[0] for cell_id, _, _ in constant_cells(all_cases(), True)}
    static = {cell_id.split("-")[0] for cell_id, _, _ in constant_cells(all_cases())}
    assert ops == static and len(ops) > 250


def test_the_xfail_table_names_real_cells():
    cells = {cell_id for cell_id, _, _ in constant_cells(all_cases()) + MIXED}
    assert set(XFAIL) <= cells, sorted(set(XFAIL) - cells)
