"""accuracy.judge on NaN and infinity placements against PyTorch's own rule,
``torch._dynamo.utils.same`` with a float64 reference (equal_nan=True, as PyTorch's benchmark
harness runs it outside float32): every placement of {finite, other finite, NaN, +inf, -inf}
in the compiled, eager and float64 value of one position, the other positions equal. Where
judge departs from same, the test names the class of placement and why (Note [NaN and
infinity, position by position] in torch_trt_ref/accuracy.py)."""

import itertools
import math

import pytest
import torch
from torch._dynamo.utils import same

from torch_trt_ref.accuracy import judge

VALUES = {"1": 1.0, "100": 100.0, "nan": math.nan, "inf": math.inf, "-inf": -math.inf}
REST = [2.0, 3.0, 4.0]


def _same(c, e, r) -> bool:
    return same(e, c, r, equal_nan=True, log_error=lambda *args, **kwargs: None)


def departure(c: float, e: float, r: float) -> str | None:
    """Why judge's verdict is the opposite of same's at this placement, or None."""
    nan = math.isnan
    if math.isinf(r) and c == r and not nan(e) and e != c:
        return "same's RMSE takes inf - inf as NaN: it fails the float64 value itself"
    if nan(c) and math.isinf(r) and e == r:
        return "same's RMSE takes inf - inf as NaN: it passes NaN where eager = float64 = inf"
    if math.isinf(e) and not nan(r) and e != r and not nan(c) and c not in (e, r):
        return ("eager is infinite where float64 is not: same passes any value not NaN; "
                "judge wants eager's value or float64's (within 3 ulps)")
    return None


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_judge_agrees_with_torch_dynamo_same_on_every_placement(dtype):
    mismatches, departures = [], 0
    for (cn, c), (en, e), (rn, r) in itertools.product(VALUES.items(), repeat=3):
        compiled = torch.tensor([c, *REST], dtype=dtype)
        eager = torch.tensor([e, *REST], dtype=dtype)
        reference = torch.tensor([r, *REST], dtype=torch.float64)
        want = _same(compiled, eager, reference)
        why = departure(c, e, r)
        departures += why is not None
        got = judge([compiled], [eager], [reference]).passed
        if got != (want if why is None else not want):
            mismatches.append(f"compiled {cn}, eager {en}, float64 {rn}: judge {got}, "
                              f"same {want}" + (f" (expected to depart: {why})" if why else ""))
    assert not mismatches, "\n".join(mismatches)
    assert departures == 20  # of 125 placements; the other 105 agree with same


def test_the_issue_placement_float64_nan_under_a_result_equal_to_eager():
    c = torch.tensor([1.0, 2.0], dtype=torch.float16)
    reference = torch.tensor([math.nan, 2.0], dtype=torch.float64)
    assert _same(c, c.clone(), reference)
    assert judge([c], [c.clone()], [reference]).passed


@pytest.mark.parametrize("first", [(1.0, 1.0, math.nan), (5.0, math.inf, 5.0)],
                         ids=["float64-nan", "eager-overflow"])
def test_a_nan_or_infinity_at_one_position_does_not_hide_an_error_at_another(first):
    """Position by position: in same, one float64 NaN makes both RMSEs NaN, and one eager
    infinity makes eager's RMSE infinite, so a wrong finite value elsewhere passes."""
    c, e, r = first
    compiled = torch.tensor([c, 2.0, 30.0, 4.0])
    eager = torch.tensor([e, 2.0, 3.0, 4.0])
    reference = torch.tensor([r, 2.0, 3.0, 4.0], dtype=torch.float64)
    assert _same(compiled, eager, reference)  # the whole-tensor rule lets it through
    verdict = judge([compiled], [eager], [reference])
    assert not verdict.passed and "RMSE vs float64" in verdict.message
