"""The float64 rule (torch_trt_ref.accuracy) on hand-derived values: every expected error
and limit below is computed by hand from exactly representable numbers."""

import math

import pytest
import torch

from torch_trt_ref.accuracy import FLOOR_ULPS, K_SMALL, SMALL_NUMEL, K, judge, rmse, to_float64

EPS32 = torch.finfo(torch.float32).eps
STEP = 2.0**-10  # 1 + k * STEP is exact in fp32 and fp16 for small k


def _ones(n: int, dtype=torch.float32) -> torch.Tensor:
    return torch.ones(n, dtype=dtype)


def test_the_factors_are_torch_dynamo_same():
    assert K == {torch.float32: 2.0, torch.float16: 3.0, torch.bfloat16: 3.0}
    assert K_SMALL == 3.0 and SMALL_NUMEL == 1000


def test_an_exact_result_passes_with_zero_errors():
    x = torch.tensor([1.0, -2.5, 3.25])
    verdict = judge(x, x.clone(), x.double())
    assert verdict.passed, verdict.message
    (out,) = verdict.outputs
    assert out.compiled_rmse == 0.0 and out.eager_rmse == 0.0 and out.ratio == 0.0


def test_k_times_eager_error_is_the_limit_in_fp32():
    # eager is off by STEP everywhere: RMSE STEP; k = 2 (fp32, >= 1000 elements)
    n = SMALL_NUMEL
    reference, eager = _ones(n).double(), _ones(n) + STEP
    floor = FLOOR_ULPS * EPS32 * 1.0  # 4 ulps of fp32 at RMS magnitude 1
    at_limit = judge(_ones(n) + 2 * STEP, eager, reference)
    assert at_limit.passed, at_limit.message
    (out,) = at_limit.outputs
    assert out.eager_rmse == STEP and out.compiled_rmse == 2 * STEP and out.ratio == 2.0
    assert out.allowed_rmse == pytest.approx(2 * STEP + floor, rel=1e-12)
    three = judge(_ones(n) + 3 * STEP, eager, reference)
    assert not three.passed
    assert three.outputs[0].ratio == 3.0
    assert "RMSE vs float64 0.00293 > allowed 0.00195" in three.message


def test_small_outputs_and_half_precisions_get_k_3():
    eager, reference = _ones(6) + STEP, _ones(6).double()
    assert judge(_ones(6) + 3 * STEP, eager, reference).passed  # 6 elements: k = 3
    # fp16 (eps = STEP): eager off by 8 STEP, allowed 3 x 8 STEP + 4 ulps = 28 STEP
    n, h = SMALL_NUMEL, torch.float16
    eager, reference = _ones(n, h) + 8 * STEP, _ones(n).double()
    half = judge(_ones(n, h) + 24 * STEP, eager, reference)
    assert half.passed, half.message
    assert half.outputs[0].allowed_rmse == 28 * STEP
    assert not judge(_ones(n, h) + 32 * STEP, eager, reference).passed
    # the same errors in fp32 (k = 2): 24 STEP > 2 x 8 STEP + 4 fp32 ulps
    assert not judge(_ones(n) + 24 * STEP, _ones(n) + 8 * STEP, reference).passed


def test_the_floor_admits_a_few_ulps_when_eager_is_exact():
    reference = _ones(4)
    one_ulp = torch.tensor([1.0 + EPS32, 1.0, 1.0, 1.0])  # RMSE eps / 2 <= 4 eps
    assert judge(one_ulp, reference, reference.double()).passed
    ten_ulps = _ones(4) + 10 * EPS32  # RMSE 10 eps > 4 eps + 3 x 0
    verdict = judge(ten_ulps, reference, reference.double())
    assert not verdict.passed and verdict.outputs[0].ratio == math.inf


def test_nan_and_infinity_are_judged_position_by_position():
    """Note [NaN and infinity, position by position]; tests/test_accuracy_nonfinite.py
    checks every placement against torch._dynamo.utils.same."""
    reference = torch.tensor([math.nan, 1.0, -math.inf], dtype=torch.float64)
    eager = reference.float()
    assert judge(eager.clone(), eager, reference).passed
    # float64 NaN: no reference at that position (same: "ignore"), the others still count
    assert judge(torch.tensor([0.0, 1.0, -math.inf]), eager, reference).passed
    assert not judge(torch.tensor([math.nan, math.nan, -math.inf]), eager, reference).passed
    assert not judge(torch.tensor([math.nan, 1.0, math.inf]), eager, reference).passed
    assert math.isnan(rmse(torch.tensor([0.0, 1.0, -math.inf]), reference))


def test_a_result_identical_to_eager_passes_where_float64_is_nan():
    """Issue 21: float64 NaN where the fp16 result (equal to eager) is finite failed."""
    c = torch.tensor([1.0, 2.0], dtype=torch.float16)
    verdict = judge([c], [c.clone()], [torch.tensor([math.nan, 2.0], dtype=torch.float64)])
    assert verdict.passed, verdict.message


def test_integer_outputs_are_exact():
    values = torch.tensor([3, 1, 2])
    indices = torch.tensor([1, 2, 0])
    assert judge((values, indices), (values, indices), (values, indices)).passed
    verdict = judge((values, torch.tensor([1, 0, 2])), (values, indices), (values, indices))
    assert not verdict.passed
    assert "output 1: 2 of 3 torch.int64 elements differ from eager" in verdict.message


def test_overflow_in_eager_must_be_reproduced():
    # 70000 overflows fp16 (max 65504) but not float64: those positions are compared with
    # eager's inf, the others by the rule
    reference = torch.tensor([70000.0, 1.0], dtype=torch.float64)
    eager = torch.tensor([math.inf, 1.0], dtype=torch.float16)
    assert judge(eager.clone(), eager, reference).passed
    clamped = judge(torch.tensor([65504.0, 1.0], dtype=torch.float16), eager, reference)
    assert not clamped.passed and "eager inf, float64 70000.0" in clamped.message


def test_a_compiled_result_finite_where_eager_overflowed_passes_when_close_to_float64():
    # eager fp16 overflowed in an intermediate step (inf) where the float64 result, 60000,
    # is representable: a compile that kept that step in fp32 gives 60000 (within 3 ulps
    # of fp16, 3 * 2**-10 * 60000 = 176), a wrong one 59000
    reference = torch.tensor([60000.0, 1.0], dtype=torch.float64)
    eager = torch.tensor([math.inf, 1.0], dtype=torch.float16)
    assert judge(torch.tensor([60000.0, 1.0], dtype=torch.float16), eager, reference).passed
    assert not judge(torch.tensor([59000.0, 1.0], dtype=torch.float16), eager,
                     reference).passed


def test_structure_mismatches_fail_with_a_message():
    x = torch.ones(2, 3)
    assert "returned 1 tensors, eager 2" in judge(x, (x, x), (x.double(), x.double())).message
    assert "shape (3, 2), eager (2, 3)" in judge(x.T.contiguous(), x, x.double()).message
    assert "dtype torch.float16" in judge(x.half(), x, x.double()).message


def test_to_float64_casts_float_tensors_only():
    out = to_float64({"x": torch.ones(2, dtype=torch.float16), "i": torch.arange(2), "s": 3})
    assert out["x"].dtype == torch.float64 and out["i"].dtype == torch.int64 and out["s"] == 3


def test_conformance_compare_records_errors_and_catches_what_the_tolerance_hid():
    from conformance.runner import compare

    reference = torch.linspace(-2, 2, 12, dtype=torch.float64).reshape(3, 4).exp()
    eager = reference.float()
    record: dict = {}
    compare(eager.clone(), eager, reference, 1e-4, 1e-4, "here", record)
    assert record["rule"] == "float64" and record["passed"] and record["ratio"] == 1.0
    off = eager + 5e-5  # inside the old fp32 tolerance (atol 1e-4), ~1000x eager's error
    record = {}
    with pytest.raises(AssertionError, match="here: output 0: RMSE vs float64"):
        compare(off, eager, reference, 1e-4, 1e-4, "here", record)
    assert record["tolerance_passed"] and not record["passed"] and record["ratio"] > 100


def test_conformance_compare_without_float64_uses_the_tolerance_and_says_why():
    from conformance.runner import compare

    x = torch.ones(2, 3)
    record: dict = {}
    compare(x + 1e-5, x, RuntimeError("no double kernel"), 1e-4, 1e-4, "here", record)
    assert record["rule"] == "tolerance" and record["passed"]
    assert record["fallback"] == "no float64 eager run (RuntimeError: no double kernel)"
    record = {}
    compare(torch.arange(3), torch.arange(3), torch.arange(3), 0.0, 0.0, "here", record)
    assert record["rule"] == "exact" and record["fallback"] == "no float output"
