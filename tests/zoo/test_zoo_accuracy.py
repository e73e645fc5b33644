"""The zoo's accuracy stage: the float64 rule on a tiny synthetic model (record fields,
fp16 eager on a deep copy) and its fallbacks (no half kernel, no float64 kernel)."""

import pytest
import torch

import zoo.cell
from zoo import measure
from zoo.entry import ZooEntry
from zoo.matrix import Cell


def _tiny() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(),
                               torch.nn.Linear(32, 8))


TINY = ZooEntry("tiny_mlp", _tiny, lambda: ((torch.randn(4, 16, generator=torch.Generator()
                                                         .manual_seed(0)),), {}),
                compile_settings={"min_block_size": 1})


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_record_has_compiled_and_eager_errors_vs_float64(monkeypatch, precision):
    monkeypatch.setattr(zoo.cell, "get", lambda name: TINY)
    record = zoo.cell.run_cell(Cell("tiny_mlp", "fast", precision), warmup=0, runs=3,
                               max_seconds=1.0)
    assert record["status"] == "ok", record["error"]
    acc = record["accuracy"]
    assert acc["rule"] == "float64" and acc["passed"], acc
    assert acc["eager_rmse"] > 0 and acc["compiled_rmse"] <= acc["allowed"]
    assert acc["ratio"] == pytest.approx(acc["compiled_rmse"] / acc["eager_rmse"])
    assert acc["notes"] == [] and acc["max_abs_error"] <= acc["tolerance"]
    if precision == "fp16":  # errors of fp16 rounding, not of fp32's
        assert acc["eager_rmse"] > 1e-5


class _Picky(torch.nn.Module):
    """A linear layer that refuses to run in some dtypes (a missing kernel)."""

    def __init__(self, refuse: torch.dtype):
        super().__init__()
        self.linear, self.refuse = torch.nn.Linear(8, 8), refuse

    def forward(self, x):
        if x.dtype == self.refuse:
            raise NotImplementedError(f"no {x.dtype} kernel")
        return self.linear(x)


def test_eager_without_a_half_kernel_is_fp32_compute_rounded():
    torch.manual_seed(0)
    model, x = _Picky(torch.float16), torch.randn(4, 8)
    eager, eager64, notes = measure.references(model, (x,), {}, torch.float16, model(x))
    assert eager.dtype == torch.float16 and eager64.dtype == torch.float64
    assert "computed in fp32" in notes[0]
    rounded = torch.nn.functional.linear(x.half().float(), model.linear.weight.half().float(),
                                         model.linear.bias.half().float()).half()
    assert torch.equal(eager, rounded)


def test_no_float64_run_falls_back_to_the_tolerance():
    torch.manual_seed(0)
    model, x = _Picky(torch.float64), torch.randn(4, 8)
    reference = model(x)
    eager, eager64, notes = measure.references(model, (x,), {}, torch.float32, reference)
    assert eager is reference and eager64 is None and "no float64 eager run" in notes[0]
    fields = measure.float64_rule(reference + 1e-4, eager, eager64, 1e-4, 1e-3, notes)
    assert fields["rule"] == "tolerance" and fields["passed"] and fields["ratio"] is None
    assert not measure.float64_rule(reference, eager, eager64, 2e-3, 1e-3, notes)["passed"]


def test_compiled_outputs_are_judged_in_eager_precision():
    # the compiled module returns fp16-computed values cast back to fp32: same as eager
    reference64 = torch.linspace(-1, 1, 50, dtype=torch.float64)
    eager = reference64.half()
    fields = measure.float64_rule(eager.float(), eager, reference64, 0.0, 1.0, [])
    assert fields["passed"] and fields["ratio"] == 1.0
