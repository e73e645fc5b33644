"""ONNX's backend node test cases on the reference executor: one test per case TensorRT's
ONNX parser parses (ids are ONNX's case names), judged against ONNX's expected outputs.
Cases that do not pass are strict xfails from onnx_xfail.py (regenerate it with
`python -m conformance.onnx_report --write-xfails`); cases the parser rejects are counted
by a floor test and listed by the report."""

from __future__ import annotations

import functools

import pytest

from torch_trt_ref.runtime.network import OnnxParseError

from .onnx_nodes import PASSED, cases, parse, run_case
from .onnx_xfail import PARSED_AT_LEAST, XFAIL


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
    outcome = run_case(name)
    assert outcome.outcome == PASSED, (
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
