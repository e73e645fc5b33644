"""Conformance cases: unary math ops. Input ranges keep each op inside its domain; the
integer cases check torch's dtype rules (exp(int) is float, ceil(int) is the int)."""

import torch

from ..case import ALL, FLOATS, INTS, Case, T

aten = torch.ops.aten
NAN, INF = float("nan"), float("inf")

# op name -> input sample (the default range [-2, 2] when None)
_RANGES = {
    "exp": None, "sin": None, "cos": None, "sinh": None, "cosh": None, "atan": None,
    "asinh": None, "erf": None, "erfc": None, "exp2": None, "expm1": None, "ceil": None,
    "floor": None, "trunc": None, "abs": None, "neg": None,
    "log": T((2, 3), low=0.1, high=4), "log2": T((2, 3), low=0.1, high=4),
    "log10": T((2, 3), low=0.1, high=4), "sqrt": T((2, 3), low=0.0, high=4),
    "rsqrt": T((2, 3), low=0.1, high=4), "log1p": T((2, 3), low=-0.5, high=4),
    "reciprocal": T((2, 3), low=0.25, high=2), "tan": T((2, 3), low=-1.2, high=1.2),
    "asin": T((2, 3), low=-0.9, high=0.9), "acos": T((2, 3), low=-0.9, high=0.9),
    "atanh": T((2, 3), low=-0.9, high=0.9), "acosh": T((2, 3), low=1.1, high=4),
}

# Values chosen by hand: halves (round-half-even), signed zeros, NaN and infinities.
HALVES = T((2, 4), values=[[0.5, 1.5, 2.5, -0.5], [-1.5, -2.5, 0.49, 3.51]])
SPECIAL = T((2, 3), values=[[1.0, NAN, INF], [-INF, 0.0, -2.0]])
SIGNS = T((2, 3), values=[[-3.0, -0.0, 0.0], [2.0, -0.25, 7.0]])

# Integer inputs with a float32 result are compared with the float32 tolerance.
FLOAT_RESULT_TOL = {torch.int32: (1e-4, 1e-4), torch.int64: (1e-4, 1e-4)}

CASES = [
    *[Case(getattr(aten, name).default, (sample or T((2, 3)),))
      for name, sample in _RANGES.items()],
    # integer inputs: float result, kept int, or the int itself
    *[Case(getattr(aten, name).default, (T((2, 3), low=1, high=4),), name="int", dtypes=INTS,
           tol=FLOAT_RESULT_TOL) for name in ("exp", "log", "sqrt", "reciprocal", "sin", "expm1")],
    *[Case(getattr(aten, name).default, (T((2, 3)),), name="int", dtypes=INTS)
      for name in ("abs", "neg", "sign", "ceil", "floor", "round", "trunc")],
    Case(aten.sign.default, (SIGNS,), dynamic=False),
    Case(aten.sign.default, (T((2, 3)),), name="random"),
    Case(aten.round.default, (HALVES,), name="half_even", dynamic=False),
    Case(aten.round.default, (T((2, 3), low=-5, high=5),)),
    Case(aten.round.decimals, (T((2, 3)),), {"decimals": 2}, dtypes=(torch.float32,)),
    Case(aten.round.decimals, (T((2, 3), low=-500, high=500),), {"decimals": -2},
         name="negative", dtypes=(torch.float32,)),
    Case(aten.trunc.default, (HALVES,), name="halves", dynamic=False),
    Case(aten.isnan.default, (SPECIAL,), dynamic=False),
    Case(aten.isnan.default, (T((2, 3)),), name="random", dtypes=ALL),
    Case(aten.isinf.default, (SPECIAL,), dynamic=False),
    Case(aten.isinf.default, (T((2, 3)),), name="random", dtypes=ALL),
    Case(aten.signbit.default, (SIGNS,), dynamic=False),
    Case(aten.signbit.default, (T((2, 3)),), name="random", dtypes=ALL),
    Case(aten.exp.default, (SPECIAL,), name="special", dynamic=False, dtypes=FLOATS),
    Case(aten.exp.default, (T(()),), name="zero_dim", dtypes=(torch.float32,)),
]
