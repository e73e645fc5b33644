"""Matrix-multiply converters: mm, bmm and the fused scaled-add forms addmm, addmv, addbmm
onto IMatrixMultiplyLayer (floating point only: TensorRT has no integer matmul)."""

from __future__ import annotations

import torch

from .. import helpers
from .._trt_ops import EW, RED
from ..blocks.linalg import MAT
from ..blocks.nodes import float_operands_ok
from ..registry import converter

aten = torch.ops.aten


def _operand(ctx, x, op, dtype):
    """An ITensor and its MatrixOperation. A weight seen transposed (``linear``'s
    ``permute(weight)``) becomes the untransposed weight read with TRANSPOSE, so the
    engine stores the model's weight instead of a transposed copy."""
    if (op == MAT.NONE and isinstance(x, torch.Tensor) and x.dim() >= 2
            and not x.is_contiguous() and x.mT.is_contiguous()):
        return helpers.itensor(ctx, x.mT, dtype), MAT.TRANSPOSE
    return helpers.itensor(ctx, x, dtype), op


def _matmul(ctx, a, b, op1=MAT.NONE):
    dtype = ctx.out_dtype
    a, op0 = _operand(ctx, a, MAT.NONE, dtype)
    b, op1 = _operand(ctx, b, op1, dtype)
    layer = ctx.net.add_matrix_multiply(a, op0, b, op1)
    return ctx.name_layer(layer, "matmul").get_output(0)


def _scaled_add(ctx, product, input, beta, alpha):
    """beta * input + alpha * product; with beta == 0 ``input`` is ignored (even NaN)."""
    dtype = ctx.out_dtype
    if alpha != 1:
        product = helpers.elementwise(ctx, EW.PROD, product, alpha, dtype)
    if beta == 0:
        return product
    if beta != 1:
        input = helpers.elementwise(ctx, EW.PROD, input, beta, dtype)
    return helpers.elementwise(ctx, EW.SUM, product, input, dtype)


@converter(aten.mm.default, aten.bmm.default, validator=float_operands_ok, dynamic=True,
           constants=("input", "mat2"))
def mm(ctx, input, mat2):
    return _matmul(ctx, input, mat2)


@converter(aten.addmm.default, validator=float_operands_ok, dynamic=True,
           constants=("mat1", "mat2"))
def addmm(ctx, input, mat1, mat2, beta=1, alpha=1):
    return _scaled_add(ctx, _matmul(ctx, mat1, mat2), input, beta, alpha)


@converter(aten.addmv.default, validator=float_operands_ok, dynamic=True,
           constants=("mat", "vec"))
def addmv(ctx, input, mat, vec, beta=1, alpha=1):
    return _scaled_add(ctx, _matmul(ctx, mat, vec, MAT.VECTOR), input, beta, alpha)


@converter(aten.addbmm.default, validator=float_operands_ok, dynamic=True,
           constants=("batch1", "batch2"))
def addbmm(ctx, input, batch1, batch2, beta=1, alpha=1):
    """The batch of products is summed: beta * input + alpha * sum_b(batch1[b] @ batch2[b])."""
    products = _matmul(ctx, batch1, batch2)
    summed = ctx.name_layer(ctx.net.add_reduce(products, RED.SUM, 1, False), "batch_sum")
    return _scaled_add(ctx, summed.get_output(0), input, beta, alpha)
