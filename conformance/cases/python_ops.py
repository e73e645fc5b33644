"""Conformance cases: SymInt arithmetic (aten.sym_size.int and the Python operators
torch.export emits on sizes). These graphs exist only with dynamic shapes."""

import math
import operator

import torch

from ..case import Case, T

aten = torch.ops.aten
F32 = (torch.float32,)
X = T((6, 2))


def rows(x):
    return aten.view.default(x, [x.shape[0], -1])


def numel(x):
    return x.view(x.numel())


def doubled(x):
    return torch.full([x.shape[0] * 2], 0.5)


def halves(x):
    return torch.full([x.shape[0] // 2], 1.5)


def all_but_one(x):
    return torch.full([x.shape[0] - 1, 2], 2.0)


def last_rows(x):
    return x[-x.shape[0] + 1:]


def scaled(x):
    return x * (x.shape[0] / 4)


def squared(x):
    return x * (x.shape[0] ** 2)


def at_least_7(x):
    return torch.full([max(x.shape[0], 7)], 1.0)


def at_most_6(x):
    return torch.full([min(x.shape[0], 6)], 1.0)


def ceil_half(x):
    return torch.full([math.ceil(x.shape[0] / 4)], 1.0)


def mod_plus_2(x):
    return torch.full([x.shape[0] % 4 + 2], 1.0)


def _compare(op):
    def fn(x):
        return x * op(x.shape[0], 5)  # the dynamic cells run at sizes 5 and 8
    fn.__name__ = f"size_{op.__name__}_5"
    return fn


def at_most_5(x):
    return x * torch.sym_not(x.shape[0] > 5)  # the dynamic cells run at sizes 5 and 8


def _case(fn, target, dtypes=F32):
    return Case(fn, (X,), check_op=target, dtypes=dtypes, static=False, name=fn.__name__)


CASES = [
    _case(rows, aten.sym_size.int, dtypes=(torch.float32, torch.int64, torch.bool)),
    _case(numel, aten.sym_numel.default),
    _case(doubled, operator.mul),
    _case(halves, operator.floordiv),
    _case(all_but_one, operator.sub),
    _case(last_rows, operator.neg),
    _case(last_rows, operator.add),
    _case(scaled, operator.truediv),
    _case(squared, operator.pow),
    _case(at_least_7, torch.sym_max),
    _case(at_most_6, torch.sym_min),
    _case(ceil_half, math.ceil),
    _case(at_most_5, torch.sym_not),
    _case(mod_plus_2, operator.mod),
    *[_case(_compare(op), op) for op in (operator.eq, operator.ne, operator.lt, operator.le,
                                          operator.gt, operator.ge)],
]
