"""The float64 accuracy rule (DESIGN D10): a compiled result passes when its error against
eager float64 is within k times eager's own error in the compile precision, plus a floor
of a few ulps for results eager gets exactly. The rule is PyTorch's own benchmark rule
(``torch._dynamo.utils.same`` with an fp64 reference), so the tolerance is not ours."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
from torch.utils._pytree import tree_leaves

# Note [k per precision]
# torch._dynamo.utils.same (the rule of PyTorch's benchmark harness) multiplies eager's
# RMSE vs float64 by 2 for fp32 results and by 3 for fp16/bf16 results (AMP reorders
# roundings), and by 3 for any result with fewer than 1000 elements (noise dominates the
# RMSE of small tensors). We take the same factors.
K = {torch.float32: 2.0, torch.float16: 3.0, torch.bfloat16: 3.0}
K_SMALL = 3.0
SMALL_NUMEL = 1000

# Note [floor]
# A result eager computes exactly (relu, a copy, a gather) has eager error 0, so k x 0
# would demand bit-exactness of any other exact-but-reordered computation. The floor is
# FLOOR_ULPS units of roundoff of the result's dtype at the float64 result's RMS magnitude:
# an exact result may differ from float64 by its final rounding and a few reordered sums.
FLOOR_ULPS = 4.0


def _eps(dtype: torch.dtype) -> float:
    return torch.finfo(dtype).eps if dtype.is_floating_point else 0.0


def _same_nonfinite(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Same NaN positions and the same infinities where ``b`` is infinite."""
    inf = torch.isinf(b)
    return torch.equal(torch.isnan(a), torch.isnan(b)) and torch.equal(a[inf], b[inf])


def rmse(a: torch.Tensor, b: torch.Tensor) -> float:
    """Root-mean-square difference of ``a`` from the reference ``b``, in float64, over the
    positions where ``b`` is finite; NaN where ``a`` is not finite at such a position or
    differs from ``b``'s NaN/inf elsewhere (mismatches no tolerance covers)."""
    a, b = a.detach().double().flatten(), b.detach().double().flatten()
    finite = torch.isfinite(b)
    if not _same_nonfinite(a[~finite], b[~finite]) or not torch.isfinite(a[finite]).all():
        return math.nan
    if not finite.any():
        return 0.0
    return float(((a[finite] - b[finite]) ** 2).mean().sqrt())


@dataclass
class OutputError:
    """Errors of one output against float64: the compiled result's and eager's in the
    compile precision (RMSE, and max abs for the report), the allowed RMSE and the verdict."""

    index: int
    dtype: str
    numel: int
    compiled_rmse: float
    eager_rmse: float
    compiled_max_abs: float
    eager_max_abs: float
    allowed_rmse: float
    passed: bool

    @property
    def ratio(self) -> float:
        """compiled / eager RMSE (inf when eager is exact and the compiled result is not)."""
        if self.eager_rmse > 0:
            return self.compiled_rmse / self.eager_rmse
        return 0.0 if self.compiled_rmse == 0 else math.inf


@dataclass
class Verdict:
    """The rule applied to every output; ``passed`` when all outputs pass."""

    outputs: list[OutputError]
    passed: bool
    message: str = ""

    def worst(self) -> OutputError | None:
        return max(self.outputs, key=lambda o: (not o.passed, o.ratio), default=None)

    def to_json(self) -> dict:
        worst = self.worst()
        return {"passed": self.passed, "message": self.message,
                "compiled_rmse": worst.compiled_rmse if worst else 0.0,
                "eager_rmse": worst.eager_rmse if worst else 0.0,
                "compiled_max_abs": max((o.compiled_max_abs for o in self.outputs), default=0.0),
                "eager_max_abs": max((o.eager_max_abs for o in self.outputs), default=0.0),
                "ratio": worst.ratio if worst else 0.0,
                "outputs": [asdict(o) for o in self.outputs]}


# Note [NaN and infinity, position by position]
# torch._dynamo.utils.same first accepts a result equal to eager (allclose, equal_nan), then
# compares RMSEs against float64, where one NaN or infinity decides for the whole tensor:
# a NaN in float64 makes both RMSEs NaN, which it passes as "ref unable to produce this
# with stable numerics in this precision, ignore"; an eager infinity makes eager's RMSE
# infinite, so any result not NaN passes. We take the same answers for each position that
# holds a NaN or an infinity (in the compiled, eager or float64 value), so such a position
# neither hides nor fails the finite positions, which the RMSE rule judges:
#   1. the compiled value equals eager's (NaN equals NaN): passes;
#   2. float64 is NaN: no reference there; passes (same's "ignore");
#   3. eager is NaN or an infinity float64 does not have (eager broke in its precision):
#      the compiled value must be float64's, or finite within K_SMALL ulps of it (same
#      accepts it within 4e-2 where eager is NaN and any value not NaN where eager is
#      infinite; a single op in the conformance suite is held to more);
#   4. otherwise the compiled value must not be NaN, and its error |c - r| must be at most
#      eager's, an equal infinity counting as error 0 (in same, inf - inf is NaN: it fails
#      a result equal to an infinite float64 value and passes a NaN where eager and float64
#      agree on an infinity).
# tests/test_accuracy_nonfinite.py checks this against same over a grid of placements.


def nonfinite_positions(c: torch.Tensor, e: torch.Tensor, r: torch.Tensor,
                        dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """``(decided, failed)`` masks: the positions where the compiled ``c``, eager ``e`` or
    float64 ``r`` value is NaN or infinite, judged one by one (Note [NaN and infinity,
    position by position]) and left out of the RMSE; the failing ones among them."""
    c, e, r = (t.detach().double() for t in (c, e, r))
    decided = ~(torch.isfinite(c) & torch.isfinite(e) & torch.isfinite(r))
    nan_c, nan_e, nan_r = torch.isnan(c), torch.isnan(e), torch.isnan(r)
    like_eager = (c == e) | (nan_c & nan_e)
    broke = ~nan_r & (nan_e | (torch.isinf(e) & (e != r)))
    near = torch.isfinite(c) & torch.isfinite(r) & (
        (c - r).abs() <= K_SMALL * _eps(dtype) * r.abs())
    err_c = torch.where(c == r, 0.0, (c - r).abs())
    err_e = torch.where(e == r, 0.0, (e - r).abs())
    passed = like_eager | nan_r | torch.where(broke, (c == r) | near,
                                              ~nan_c & (err_c <= err_e))
    return decided, decided & ~passed


def tensors(value) -> list[torch.Tensor]:
    """The tensors of a (nested) output, in pytree order (transformers ModelOutput too)."""
    return [t for t in tree_leaves(value) if isinstance(t, torch.Tensor)]


def _max_abs(a: torch.Tensor, b: torch.Tensor) -> float:
    diff = (a.detach().double() - b.detach().double()).abs()
    diff = diff[torch.isfinite(diff)]
    return float(diff.max()) if diff.numel() else 0.0


def allowed(eager_rmse: float, reference: torch.Tensor, dtype: torch.dtype) -> float:
    """The RMSE a compiled result of ``dtype`` may have: k x eager's, plus the floor."""
    k = K_SMALL if reference.numel() < SMALL_NUMEL else K.get(dtype, K_SMALL)
    finite = reference.detach()[torch.isfinite(reference)].double()
    scale = float(finite.pow(2).mean().sqrt()) if finite.numel() else 0.0
    floor = FLOOR_ULPS * _eps(dtype) * scale + torch.finfo(torch.float32).tiny
    return k * eager_rmse + floor


def judge(compiled, eager, reference64, eager_reference64=None) -> Verdict:
    """Apply the rule to every output. ``eager`` is the model run eagerly in the compile
    precision, ``reference64`` the same model run in float64 on float64 inputs
    (``eager_reference64``, when given, is what eager's error is measured against instead:
    the tie-aware quantized oracle, torch_trt_ref/quantization/ties.py). Positions
    holding a NaN or an infinity are judged one by one (Note [NaN and infinity, position by
    position]), the others by the RMSE rule. Integer and bool outputs must equal eager's
    exactly; output count, shape or dtype mismatches fail with a message instead of
    numbers."""
    got, ref, ref64 = tensors(compiled), tensors(eager), tensors(reference64)
    eager64 = ref64 if eager_reference64 is None else tensors(eager_reference64)
    if not len(got) == len(ref) == len(ref64):
        return Verdict([], False, f"compiled model returned {len(got)} tensors, eager "
                                  f"{len(ref)}, float64 eager {len(ref64)}")
    outputs, messages = [], []
    for i, (c, e, r, re) in enumerate(zip(got, ref, ref64, eager64)):
        if c.shape != e.shape:
            messages.append(f"output {i}: shape {tuple(c.shape)}, eager {tuple(e.shape)}")
            continue
        if c.dtype != e.dtype:
            messages.append(f"output {i}: dtype {c.dtype}, eager {e.dtype}")
            continue
        if not e.is_floating_point() or not r.is_floating_point():
            same = torch.equal(c, e)
            outputs.append(OutputError(i, str(e.dtype).replace("torch.", ""), e.numel(),
                                       0.0 if same else math.inf, 0.0, 0.0, 0.0, 0.0, same))
            if not same:
                messages.append(f"output {i}: {int((c != e).sum())} of {e.numel()} "
                                f"{e.dtype} elements differ from eager")
            continue
        decided, failed = nonfinite_positions(c, e, r, e.dtype)
        if failed.any():
            at = int(failed.flatten().nonzero()[0])
            values = [float(t.detach().flatten()[at]) for t in (c, e, r)]
            messages.append(f"output {i}: {int(failed.sum())} element(s) where a NaN or an "
                            "infinity is not accepted (first at flat index "
                            f"{at}: compiled {values[0]}, eager {values[1]}, float64 "
                            f"{values[2]}; the rule: Note [NaN and infinity, position by "
                            "position] in torch_trt_ref/accuracy.py)")
        c, e, r, re = c[~decided], e[~decided], r[~decided], re[~decided]
        compiled_rmse, eager_rmse = rmse(c, r), rmse(e, re)
        limit = allowed(eager_rmse, r, e.dtype)
        ok = not math.isnan(compiled_rmse) and compiled_rmse <= limit and not (
            messages and messages[-1].startswith(f"output {i}:"))
        outputs.append(OutputError(i, str(e.dtype).replace("torch.", ""), e.numel(),
                                   compiled_rmse, eager_rmse, _max_abs(c, r), _max_abs(e, re),
                                   limit, ok))
        if not ok and not (messages and messages[-1].startswith(f"output {i}:")):
            messages.append(f"output {i}: RMSE vs float64 {compiled_rmse:.3g} > allowed "
                            f"{limit:.3g} (eager {e.dtype} RMSE {eager_rmse:.3g}; max abs "
                            f"error {outputs[-1].compiled_max_abs:.3g}, eager "
                            f"{outputs[-1].eager_max_abs:.3g})")
    return Verdict(outputs, not messages, "; ".join(messages))


def cast_floats(value, dtype: torch.dtype):
    """``value`` with every floating tensor cast to ``dtype`` (other leaves unchanged)."""
    return torch.utils._pytree.tree_map(
        lambda t: t.to(dtype) if isinstance(t, torch.Tensor) and t.is_floating_point() else t,
        value)


def to_float64(value):
    """``value`` with every floating tensor cast to float64 (inputs of the float64 run)."""
    return cast_floats(value, torch.float64)


def max_abs_error(actual, expected) -> float:
    """The largest absolute difference of the floating outputs (the CLI's quick number)."""
    flat_a = tree_leaves(actual)
    flat_e = tree_leaves(expected)
    if len(flat_a) != len(flat_e):
        raise AssertionError(f"compiled module returned {len(flat_a)} values, eager "
                             f"{len(flat_e)}")
    worst = 0.0
    for a, e in zip(flat_a, flat_e):
        if isinstance(e, torch.Tensor) and e.is_floating_point():
            worst = max(worst, (a.float() - e.float()).abs().max().item() if e.numel() else 0.0)
    return worst
