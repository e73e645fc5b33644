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


def _overflow_ok(c: torch.Tensor, e: torch.Tensor, r: torch.Tensor, dtype) -> bool:
    """Where eager overflows in its precision but float64 does not, a compiled element
    passes when it overflows the same way, or when it is finite and within K_SMALL ulps
    of float64 (a compile that kept the overflowing step in fp32 is more accurate than
    eager, not wrong)."""
    c, e = c.double(), e.double()
    same = (c == e) | (torch.isnan(c) & torch.isnan(e))
    close = torch.isfinite(c) & ((c - r).abs() <= K_SMALL * _eps(dtype) * r.abs())
    return bool((same | close).all())


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


def judge(compiled, eager, reference64) -> Verdict:
    """Apply the rule to every output. ``eager`` is the model run eagerly in the compile
    precision, ``reference64`` the same model run in float64 on float64 inputs. Integer
    and bool outputs must equal eager's exactly; output count, shape or dtype mismatches
    fail with a message instead of numbers."""
    got, ref, ref64 = tensors(compiled), tensors(eager), tensors(reference64)
    if not len(got) == len(ref) == len(ref64):
        return Verdict([], False, f"compiled model returned {len(got)} tensors, eager "
                                  f"{len(ref)}, float64 eager {len(ref64)}")
    outputs, messages = [], []
    for i, (c, e, r) in enumerate(zip(got, ref, ref64)):
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
        broke = torch.isfinite(r) & ~torch.isfinite(e)
        if broke.any() and not _overflow_ok(c[broke], e[broke], r[broke], e.dtype):
            messages.append(f"output {i}: where eager {e.dtype} is not finite (overflow) but "
                            "float64 is, the compiled result neither equals eager nor is "
                            "within 3 ulps of float64")
        c, e, r = c[~broke], e[~broke], r[~broke]
        compiled_rmse, eager_rmse = rmse(c, r), rmse(e, r)
        limit = allowed(eager_rmse, r, e.dtype)
        ok = not math.isnan(compiled_rmse) and compiled_rmse <= limit and not (
            messages and messages[-1].startswith(f"output {i}:"))
        outputs.append(OutputError(i, str(e.dtype).replace("torch.", ""), e.numel(),
                                   compiled_rmse, eager_rmse, _max_abs(c, r), _max_abs(e, r),
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
