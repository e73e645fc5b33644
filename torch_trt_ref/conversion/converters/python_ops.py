"""Converters for Python-level graph ops: tuple indexing and SymInt arithmetic."""

from __future__ import annotations

import operator

import torch

from .. import helpers
from ..registry import converter


@converter(operator.getitem, dynamic=True)
def getitem(ctx, sequence, index):
    return sequence[index]


_SYM_OPS = {
    operator.add: ("SUM", operator.add), operator.sub: ("SUB", operator.sub),
    operator.mul: ("PROD", operator.mul), operator.floordiv: ("FLOOR_DIV", operator.floordiv),
}


def _register_sym_op(target, trt_op_name, python_fn):
    @converter(target, dynamic=True, family="python_ops")
    def convert(ctx, a, b):
        if not helpers.is_tensor(a) and not helpers.is_tensor(b):
            return python_fn(a, b)
        op = getattr(helpers.trt.ElementWiseOperation, trt_op_name)
        return helpers.elementwise(ctx, op, a, b, torch.int64)


for _target, (_name, _fn) in _SYM_OPS.items():
    _register_sym_op(_target, _name, _fn)
