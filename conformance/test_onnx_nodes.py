"""ONNX's backend node test cases on the reference executor: one test per case TensorRT's
ONNX parser parses (ids are ONNX's case names), judged against ONNX's expected outputs.
Cases that do not pass are strict xfails from onnx_xfail.py (regenerate it with
`python -m conformance.onnx_report --write-xfails`); cases the parser rejects are counted
by a floor test and listed by the report."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch

from torch_trt_ref.runtime.network import OnnxParseError

from .onnx_nodes import PASSED, cases, compare, parse, run_case
from .onnx_nodes import REJECTED as REJECTED_OUTCOME
from .onnx_xfail import PARSED_AT_LEAST, REJECTED, XFAIL


@functools.lru_cache(maxsize=1)
def parsed_cases() -> tuple[str, ...]:
    names = []
    for name, case in sorted(cases().items()):
        try:
            parse(case.model.SerializeToString())
        except OnnxParseError:
            continue
        names.append(name)
    return tuple(names)


def _param(name: str):
    marks = [pytest.mark.xfail(strict=True, reason=XFAIL[name])] if name in XFAIL else []
    return pytest.param(name, id=name, marks=marks)


@pytest.mark.parametrize("name", [_param(n) for n in parsed_cases()])
def test_onnx_node(name: str):
    """Passes on the executor within ONNX's tolerances, or, for a case TensorRT's builder
    refuses, the executor and the real builder both refuse it."""
    outcome = run_case(name)
    expected = REJECTED_OUTCOME if name in REJECTED else PASSED
    assert outcome.outcome == expected, (
        f"{outcome.outcome}: {outcome.reason}\nlayer kinds: {', '.join(outcome.kinds)}\n"
        f"reproduce: python -m conformance.onnx_report --case {name}")


def test_parsed_cases_do_not_drop():
    assert len(parsed_cases()) >= PARSED_AT_LEAST, (
        f"TensorRT's ONNX parser parses {len(parsed_cases())} ONNX node cases, fewer than "
        f"the {PARSED_AT_LEAST} recorded in onnx_xfail.py (list the rejected ones with "
        f"python -m conformance.onnx_report --markdown PATH)")


def test_xfail_table_names_parsed_cases():
    unknown = sorted(set(XFAIL) - set(parsed_cases()))
    assert not unknown, f"onnx_xfail.py names cases that are not parsed: {unknown[:10]}"


F32, I64 = np.float32, np.int64


def _t(values, dtype=torch.float32):
    return torch.tensor(values, dtype=dtype)


@pytest.mark.parametrize("expected, actual, problem", [
    (np.array([1.0, 100.0], F32), _t([1.0, 100.09]), None),  # |d| <= 1e-7 + 1e-3 |ref|
    (np.array([1.0, 100.0], F32), _t([1.0, 100.11]), "1 of 2 elements differ beyond"),
    (np.array([np.nan, 1.0], F32), _t([np.nan, 1.0]), None),
    (np.array([np.nan, 1.0], F32), _t([0.0, 1.0]), "differ in NaN positions"),
    (np.array([np.inf, 1.0], F32), _t([-np.inf, 1.0]), "differ in inf positions"),
    (np.array([np.inf, 1.0], F32), _t([3e38, 1.0]), "differ in inf positions"),
    (np.array([2, 3], I64), _t([2, 3], torch.int32), None),  # int64 -> int32 by value
    (np.array([2, 3], I64), _t([2, 4], torch.int64), "1 of 2 elements differ (at (1,)"),
    (np.array([2.0, 3.0], F32), _t([[2.0, 3.0]]), "shape (1, 2), expected (2,)"),
    (np.array([True, False]), _t([1.0, 0.0]), "dtype torch.float32, expected torch.bool"),
    (np.float32(0.5), _t(0.5), None),  # ONNX ships some 0-d tensors as numpy scalars
])
def test_compare_follows_onnx_rules(expected, actual, problem):
    """Note [ONNX tolerances] on hand-made values: rtol=1e-3, atol=1e-7, NaN and inf in the
    same places, integers exact, shapes exact."""
    found = compare("y", expected, actual, rtol=1e-3, atol=1e-7)
    assert (found is None) if problem is None else (problem in (found or "")), found
