"""Conformance cases: random tensors (rand, randn, randint, randperm) and native_dropout.
Note [Random cases]: random values are never compared. Each wrapper returns properties that
hold for every draw (range, permutation) plus ``full_like(r, ...)``, which checks the
shape and dtype of the draw without its values; distributions are checked by
tests/test_random_converters.py."""

import torch

from ..case import FLOATS, INTS, Case, T

aten = torch.ops.aten
F32 = (torch.float32,)


def rand_in_unit(x):
    r = aten.rand.default([x.shape[0], 64], dtype=x.dtype)
    return (r >= 0) & (r < 1), aten.full_like.default(r, 0.5)


def randn_finite(x):
    r = aten.randn.default([x.shape[0], 64], dtype=x.dtype)
    return torch.isfinite(r), aten.full_like.default(r, 0.5)


def randint_in_range(x):
    r = aten.randint.default(7, [x.shape[0], 64], dtype=x.dtype)
    return (r >= 0) & (r < 7), aten.full_like.default(r, 1)


def randint_low_in_range(x):
    r = aten.randint.low(-3, 5, [x.shape[0], 64], dtype=x.dtype)
    return (r >= -3) & (r < 5), aten.full_like.default(r, 1)


def randint_one_value(x):
    return aten.randint.low(4, 5, [x.shape[0], 3], dtype=x.dtype)


def randperm_sorted(x):
    """A permutation of 0..n-1, sorted, is arange(n) whatever the draw."""
    return aten.sort.default(aten.randperm.default(50, dtype=x.dtype))[0]


def dropout_kept(x, p, train):
    out, mask = aten.native_dropout.default(x, p, train)
    return out, mask


CASES = [
    Case(rand_in_unit, (T((3, 2)),), check_op=aten.rand.default),
    Case(randn_finite, (T((3, 2)),), check_op=aten.randn.default),
    Case(randint_in_range, (T((3, 2)),), check_op=aten.randint.default, dtypes=INTS + F32),
    Case(randint_low_in_range, (T((3, 2)),), check_op=aten.randint.low, dtypes=INTS + F32),
    Case(randint_one_value, (T((3, 2)),), check_op=aten.randint.low, dtypes=INTS,
         name="single_value"),
    Case(randperm_sorted, (T((2,)),), check_op=aten.randperm.default, dtypes=INTS + F32,
         dynamic=False),
    Case(aten.native_dropout.default, (T((3, 4)), 0.5, False), dtypes=FLOATS),
    Case(dropout_kept, (T((3, 4)), 0.0, True), check_op=aten.native_dropout.default,
         dtypes=F32, name="p0_train"),
    Case(dropout_kept, (T((3, 4)), 0.5, True), check_op=aten.native_dropout.default,
         dtypes=F32, name="train", dynamic=False,
         xfail={torch.float32: "training-mode dropout is random and stays in PyTorch (the "
                               "validator's reason; the cell cannot compile fully)"}),
]
