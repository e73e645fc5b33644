"""Reference ELEMENTWISE, UNARY and ACTIVATION layers against hand-derived values (the
expected numbers below were worked out by hand from TensorRT's documented formulas)."""

import math

import pytest
import torch

from .conftest import f32, run_one

NAN, INF = float("nan"), float("inf")


def i32(values):
    return torch.tensor(values, dtype=torch.int32)


def b(values):
    return torch.tensor(values, dtype=torch.bool)


@pytest.mark.parametrize("op,a,b_,expected", [
    ("SUM", f32([1.5, -2.0]), f32([0.5, 3.0]), f32([2.0, 1.0])),
    ("SUB", i32([5, -1]), i32([7, -4]), i32([-2, 3])),
    ("PROD", f32([[1.0], [2.0]]), f32([[3.0, -4.0]]), f32([[3.0, -4.0], [6.0, -8.0]])),
    ("MAX", i32([1, -3]), i32([0, -2]), i32([1, -2])),
    ("MIN", f32([1.0, -3.0]), f32([0.0, -2.0]), f32([0.0, -3.0])),
    ("DIV", f32([1.0, -3.0]), f32([4.0, 2.0]), f32([0.25, -1.5])),
    ("POW", f32([2.0, 9.0]), f32([3.0, 0.5]), f32([8.0, 3.0])),
    ("POW", i32([2, -3]), i32([3, 2]), i32([8, 9])),
    # floor division rounds toward -inf, for ints and floats
    ("FLOOR_DIV", i32([7, -7, 7, -7]), i32([2, 2, -2, -2]), i32([3, -4, -4, 3])),
    ("FLOOR_DIV", f32([7.0, -7.0, 1.0]), f32([2.0, 2.0, 4.0]), f32([3.0, -4.0, 0.0])),
])
def test_elementwise_arithmetic(op, a, b_, expected):
    out = run_one("ELEMENTWISE", (a, b_), op=op)
    assert out.dtype == expected.dtype
    assert torch.equal(out, expected)


def test_integer_div_truncates():
    # Note [Integer division] in math_ops: -7 / 2 is -3 (toward zero), not -4.
    out = run_one("ELEMENTWISE", (i32([7, -7, 7, -7]), i32([2, 2, -2, -2])), op="DIV")
    assert torch.equal(out, i32([3, -3, -3, 3]))


@pytest.mark.parametrize("op,expected", [
    ("AND", [False, False, False, True]),
    ("OR", [False, True, True, True]),
    ("XOR", [False, True, True, False]),
])
def test_elementwise_logical(op, expected):
    out = run_one("ELEMENTWISE", (b([False, False, True, True]), b([False, True, False, True])),
                  op=op)
    assert torch.equal(out, b(expected))


@pytest.mark.parametrize("op,expected", [
    ("EQUAL", [False, True, False, False]),
    ("GREATER", [False, False, True, False]),
    ("LESS", [True, False, False, False]),
])
def test_elementwise_comparisons_output_bool_and_nan_is_false(op, expected):
    out = run_one("ELEMENTWISE", (f32([1.0, 2.0, 3.0, NAN]), f32([2.0, 2.0, 2.0, 2.0])), op=op)
    assert torch.equal(out, b(expected))


@pytest.mark.parametrize("op,x,expected", [
    ("EXP", [0.0, 1.0], [1.0, math.e]),
    ("LOG", [1.0, math.e], [0.0, 1.0]),
    ("SQRT", [4.0, 0.25], [2.0, 0.5]),
    ("RECIP", [4.0, -0.5], [0.25, -2.0]),
    ("ABS", [-1.5, 2.0], [1.5, 2.0]),
    ("NEG", [-1.5, 2.0], [1.5, -2.0]),
    ("SIN", [0.0, math.pi / 2], [0.0, 1.0]),
    ("COS", [0.0, math.pi], [1.0, -1.0]),
    ("TAN", [0.0, math.pi / 4], [0.0, 1.0]),
    ("SINH", [0.0, 1.0], [0.0, (math.e - 1 / math.e) / 2]),
    ("COSH", [0.0, 1.0], [1.0, (math.e + 1 / math.e) / 2]),
    ("ASIN", [0.0, 1.0], [0.0, math.pi / 2]),
    ("ACOS", [1.0, 0.0], [0.0, math.pi / 2]),
    ("ATAN", [0.0, 1.0], [0.0, math.pi / 4]),
    ("ASINH", [0.0, 1.0], [0.0, math.log(1 + math.sqrt(2))]),
    ("ACOSH", [1.0, 2.0], [0.0, math.log(2 + math.sqrt(3))]),
    ("ATANH", [0.0, 0.5], [0.0, 0.5 * math.log(3)]),
    ("CEIL", [1.2, -1.2], [2.0, -1.0]),
    ("FLOOR", [1.8, -1.2], [1.0, -2.0]),
    ("ERF", [0.0, INF], [0.0, 1.0]),
    ("SIGN", [-3.0, 0.0, 2.5], [-1.0, 0.0, 1.0]),
    # Round to nearest even for floating-point data (TensorRT's UnaryOperation docs).
    ("ROUND", [0.5, 1.5, 2.5, -0.5, -1.5, 2.6], [0.0, 2.0, 2.0, -0.0, -2.0, 3.0]),
])
def test_unary_float(op, x, expected):
    out = run_one("UNARY", (f32(x),), op=op)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, f32(expected), atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("op,x,expected", [
    ("ABS", [-3, 4], [3, 4]),
    ("NEG", [-3, 4], [3, -4]),
    ("SIGN", [-3, 0, 4], [-1, 0, 1]),
])
def test_unary_integer(op, x, expected):
    out = run_one("UNARY", (i32(x),), op=op)
    assert torch.equal(out, i32(expected))


@pytest.mark.parametrize("op,expected", [
    ("ISNAN", [False, True, False, False]),
    ("ISINF", [False, False, True, True]),
])
def test_unary_predicates(op, expected):
    out = run_one("UNARY", (f32([1.0, NAN, INF, -INF]),), op=op)
    assert torch.equal(out, b(expected))


def test_unary_not():
    assert torch.equal(run_one("UNARY", (b([True, False]),), op="NOT"), b([False, True]))


E1 = math.e - 1  # exp(1) - 1
EM1 = 1 / math.e - 1  # exp(-1) - 1


@pytest.mark.parametrize("kind,alpha,beta,x,expected", [
    ("RELU", 0.0, 0.0, [-2.0, 0.0, 3.0], [0.0, 0.0, 3.0]),
    ("SIGMOID", 0.0, 0.0, [0.0, math.log(3)], [0.5, 0.75]),
    ("TANH", 0.0, 0.0, [0.0, math.log(2)], [0.0, 0.6]),  # (4 - 1) / (4 + 1)
    ("LEAKY_RELU", 0.1, 0.0, [-2.0, 0.0, 3.0], [-0.2, 0.0, 3.0]),
    ("ELU", 2.0, 0.0, [-1.0, 0.0, 3.0], [2.0 * EM1, 0.0, 3.0]),
    ("SELU", 2.0, 3.0, [-1.0, 0.0, 1.0], [3.0 * 2.0 * EM1, 0.0, 3.0]),
    ("SOFTSIGN", 0.0, 0.0, [-3.0, 1.0], [-0.75, 0.5]),
    ("SOFTPLUS", 2.0, 1.0, [0.0], [2.0 * math.log(2)]),
    ("CLIP", -1.0, 2.0, [-5.0, 0.5, 7.0], [-1.0, 0.5, 2.0]),
    # max(alpha, min(beta, x)): with alpha > beta every element becomes alpha.
    ("CLIP", 3.0, 1.0, [0.0, 5.0], [3.0, 3.0]),
    ("HARD_SIGMOID", 0.5, 0.25, [-2.0, 0.5, 4.0], [0.0, 0.5, 1.0]),
    ("SCALED_TANH", 2.0, 1.0, [0.0, math.log(2)], [0.0, 1.2]),
    ("GELU_ERF", 0.0, 0.0, [0.0, 50.0, -50.0], [0.0, 50.0, 0.0]),
    # 0.5 * x * (1 + erf(x / sqrt(2))) at x = 1: erf(1/sqrt(2)) = 0.682689492...
    ("GELU_ERF", 0.0, 0.0, [1.0], [0.5 * (1 + 0.6826894921370859)]),
    # 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))) at x = 1
    ("GELU_TANH", 0.0, 0.0, [1.0],
     [0.5 * (1 + math.tanh(math.sqrt(2 / math.pi) * 1.044715))]),
])
def test_activation(kind, alpha, beta, x, expected):
    out = run_one("ACTIVATION", (f32(x),), type=kind, alpha=alpha, beta=beta)
    torch.testing.assert_close(out, f32(expected), atol=1e-6, rtol=1e-6)


def test_thresholded_relu_and_softplus_far_from_zero():
    # THRESHOLDED_RELU: x if x > alpha else 0 (x = alpha gives 0)
    out = run_one("ACTIVATION", (f32([0.5, 1.0, 1.5]),), type="THRESHOLDED_RELU", alpha=1.0,
                  beta=0.0)
    assert torch.equal(out, f32([0.0, 0.0, 1.5]))
    # SOFTPLUS alpha * log(1 + exp(beta * x)): at beta * x = 200 it is alpha * 200 (exp alone
    # overflows float32); at -200 it is ~exp(-200), i.e. 0 in float32
    out = run_one("ACTIVATION", (f32([100.0, -100.0]),), type="SOFTPLUS", alpha=0.5, beta=2.0)
    torch.testing.assert_close(out, f32([100.0, 0.0]))


def test_every_tensorrt_operation_has_a_reference():
    """Each member of trt.ElementWiseOperation / UnaryOperation / ActivationType runs."""
    import tensorrt_rtx as trt

    x = f32([0.5, -0.25])
    for op in trt.ElementWiseOperation.__members__:
        logical = op in ("AND", "OR", "XOR")
        a = b([True, False]) if logical else x
        assert run_one("ELEMENTWISE", (a, a), op=op).shape == (2,), op
    for op in trt.UnaryOperation.__members__:
        assert run_one("UNARY", (b([True, False]) if op == "NOT" else x,), op=op).shape == (2,)
    for kind in trt.ActivationType.__members__:
        assert run_one("ACTIVATION", (x,), type=kind, alpha=0.1, beta=0.2).shape == (2,), kind


def test_relu_keeps_integers():
    out = run_one("ACTIVATION", (i32([-2, 5]),), type="RELU", alpha=0.0, beta=0.0)
    assert torch.equal(out, i32([0, 5]))


# -- SCALE ------------------------------------------------------------------------------

def scale(x, mode, shift=None, scale=None, power=None, channel_axis=1):
    return run_one("SCALE", [x], mode=mode, channel_axis=channel_axis, shift=shift, scale=scale,
                   power=power)


def test_scale_uniform_shift_scale_power():
    x = f32([[[1.0, 2.0]], [[3.0, -1.0]]])  # (2, 1, 2)
    out = scale(x, "UNIFORM", shift=f32([1.0]), scale=f32([2.0]), power=f32([2.0]))
    # (2x + 1)^2: 9, 25, 49, 1
    assert torch.equal(out, f32([[[9.0, 25.0]], [[49.0, 1.0]]]))


def test_scale_channel_axis_one_and_defaults():
    x = torch.ones(1, 2, 2, 1)
    out = scale(x, "CHANNEL", scale=f32([3.0, -1.0]))  # shift 0, power 1 by default
    assert torch.equal(out, f32([[[[3.0], [3.0]], [[-1.0], [-1.0]]]]))


def test_scale_channel_on_last_axis():
    x = torch.ones(2, 1, 3)
    out = scale(x, "CHANNEL", shift=f32([0.0, 1.0, 2.0]), channel_axis=2)
    assert torch.equal(out, f32([[[1.0, 2.0, 3.0]], [[1.0, 2.0, 3.0]]]))


def test_scale_elementwise_covers_dims_from_channel_axis():
    x = torch.ones(2, 1, 2, 2)  # weights over (1, 2, 2), shared by both batch entries
    out = scale(x, "ELEMENTWISE", shift=f32([1.0, 2.0, 3.0, 4.0]))
    assert torch.equal(out, (torch.arange(4.0) + 2).reshape(1, 1, 2, 2).expand(2, 1, 2, 2))


def test_scale_power_half_is_square_root():
    out = scale(f32([[[4.0, 9.0]]]), "UNIFORM", power=f32([0.5]))
    assert torch.equal(out, f32([[[2.0, 3.0]]]))


# -- EINSUM -----------------------------------------------------------------------------

def test_einsum_matmul_and_transpose_against_float64_formula():
    a = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    c = torch.tensor([[5.0, 6.0], [7.0, 8.0]])
    # [[1*5+2*7, 1*6+2*8], [3*5+4*7, 3*6+4*8]]
    assert torch.equal(run_one("EINSUM", [a, c], equation="ik,kj->ij"), f32([[19, 22], [43, 50]]))
    assert torch.equal(run_one("EINSUM", [a], equation="ij->ji"), f32([[1, 3], [2, 4]]))


def test_einsum_implicit_output_and_full_sum():
    a = f32([1.0, 2.0, 3.0])
    assert torch.equal(run_one("EINSUM", [a, a], equation="i,i"), f32(14.0))  # dot: 1+4+9
    assert torch.equal(run_one("EINSUM", [f32([[1, 2], [3, 4]])], equation="ij->"), f32(10.0))
    # implicit mode: labels appearing once, in alphabetical order -> "ba,b" gives "a"
    out = run_one("EINSUM", [f32([[1, 2], [3, 4]]), f32([10, 100])], equation="ba,b")
    assert torch.equal(out, f32([310, 420]))  # a=0: 1*10+3*100; a=1: 2*10+4*100


def test_einsum_batch_matmul_keeps_int_type():
    a = torch.tensor([[[1, 2]], [[3, 4]]], dtype=torch.int32)  # (2, 1, 2)
    c = torch.tensor([[[1], [1]], [[2], [0]]], dtype=torch.int32)  # (2, 2, 1)
    out = run_one("EINSUM", [a, c], equation="bij,bjk->bik")
    assert out.dtype == torch.int32 and torch.equal(out, i32([[[3]], [[6]]]))


# -- MATRIX_MULTIPLY modes --------------------------------------------------------------

def test_matrix_multiply_vector_vector_is_a_batched_dot():
    a = f32([[1.0, 2.0], [3.0, 4.0]])  # two vectors
    out = run_one("MATRIX_MULTIPLY", [a, f32([[5.0, 6.0], [7.0, 8.0]])], op0="VECTOR",
                  op1="VECTOR")
    assert torch.equal(out, f32([17.0, 53.0]))  # 1*5+2*6, 3*7+4*8


def test_matrix_multiply_vector_times_transposed_matrix():
    # v (2) @ M^T with M = [[1, 2], [3, 4], [5, 6]] (3x2): [v.row0, v.row1, v.row2]
    m = f32([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    out = run_one("MATRIX_MULTIPLY", [f32([1.0, -1.0]), m], op0="VECTOR", op1="TRANSPOSE")
    assert torch.equal(out, f32([-1.0, -1.0, -1.0]))


def test_matrix_multiply_transposed_matrix_times_vector():
    # M^T (2x3) @ v (3) = column sums weighted by v
    m = f32([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    out = run_one("MATRIX_MULTIPLY", [m, f32([1.0, 0.0, 2.0])], op0="TRANSPOSE", op1="VECTOR")
    assert torch.equal(out, f32([11.0, 14.0]))  # 1 + 2*5, 2 + 2*6
