"""Reference data-movement layers (SHUFFLE, SHAPE, CONCATENATION, SLICE, GATHER, SELECT,
FILL, PADDING, CAST, CONSTANT, IDENTITY) against hand-derived values worked out from
TensorRT's documented operator semantics."""

import pytest
import torch

from .conftest import f32, run_one

PERM8 = (0, 1, 2, 3, 4, 5, 6, 7)  # TensorRT Permutations always carry 8 entries


def i64(values):
    return torch.tensor(values, dtype=torch.int64)


def grid(rows, cols):
    """[[0, 1, ...], [cols, cols + 1, ...], ...] as float32."""
    return torch.arange(rows * cols, dtype=torch.float32).reshape(rows, cols)


# -- CONSTANT / IDENTITY / CAST ---------------------------------------------------------

def test_constant_reshapes_flat_weights():
    out = run_one("CONSTANT", [], shape=(2, 2), weights=f32([1.0, 2.0, 3.0, 4.0]))
    assert torch.equal(out, f32([[1.0, 2.0], [3.0, 4.0]]))


def test_identity_returns_input():
    x = i64([3, -1])
    assert torch.equal(run_one("IDENTITY", [x]), x)


def test_cast_float_to_int_truncates_toward_zero():
    out = run_one("CAST", [f32([1.7, -1.7, 2.5, -0.5])], to_type="INT32")
    assert out.dtype == torch.int32
    assert torch.equal(out, torch.tensor([1, -1, 2, 0], dtype=torch.int32))


def test_cast_to_bool_is_nonzero():
    out = run_one("CAST", [f32([0.0, -0.0, 0.25, -3.0])], to_type="BOOL")
    assert torch.equal(out, torch.tensor([False, False, True, True]))


# -- SHUFFLE / SHAPE / CONCATENATION ----------------------------------------------------

def test_shuffle_transpose_reshape_transpose():
    x = grid(2, 3)  # [[0, 1, 2], [3, 4, 5]]
    out = run_one("SHUFFLE", [x], first_transpose=(1, 0) + PERM8[2:], reshape_dims=(3, 2),
                  second_transpose=(1, 0) + PERM8[2:], zero_is_placeholder=False)
    # transpose -> [[0, 3], [1, 4], [2, 5]]; reshape (3, 2) is a no-op; transpose back.
    assert torch.equal(out, f32([[0, 1, 2], [3, 4, 5]]))


def test_shuffle_reshape_infers_minus_one():
    out = run_one("SHUFFLE", [grid(2, 3)], first_transpose=PERM8, reshape_dims=(-1,),
                  second_transpose=PERM8, zero_is_placeholder=False)
    assert torch.equal(out, f32([0, 1, 2, 3, 4, 5]))


def test_shuffle_zero_is_placeholder_copies_input_dim():
    x = torch.zeros(2, 3, 4)
    copied = run_one("SHUFFLE", [x], first_transpose=PERM8, reshape_dims=(0, -1),
                     second_transpose=PERM8, zero_is_placeholder=True)
    assert copied.shape == (2, 12)
    empty = run_one("SHUFFLE", [torch.zeros(0, 3)], first_transpose=PERM8, reshape_dims=(0, 5),
                    second_transpose=PERM8, zero_is_placeholder=False)
    assert empty.shape == (0, 5)


def test_shuffle_shape_tensor_input_overrides_reshape_dims():
    out = run_one("SHUFFLE", [grid(2, 3), i64([3, 2])], first_transpose=PERM8,
                  reshape_dims=None, second_transpose=PERM8, zero_is_placeholder=False)
    assert torch.equal(out, f32([[0, 1], [2, 3], [4, 5]]))


def test_shape_is_int64_vector():
    out = run_one("SHAPE", [torch.zeros(2, 0, 5)])
    assert out.dtype == torch.int64 and torch.equal(out, i64([2, 0, 5]))


def test_concatenation_along_axis():
    out = run_one("CONCATENATION", [f32([[1.0], [2.0]]), f32([[3.0, 4.0], [5.0, 6.0]])], axis=1)
    assert torch.equal(out, f32([[1, 3, 4], [2, 5, 6]]))


# -- SLICE ------------------------------------------------------------------------------

def slice_(x, start, shape, stride, mode="STRICT_BOUNDS", extra=()):
    return run_one("SLICE", [x, *extra], start=start, shape=shape, stride=stride, mode=mode)


def test_slice_static_strided():
    out = slice_(grid(3, 4), (1, 0), (2, 2), (1, 2))
    assert torch.equal(out, f32([[4, 6], [8, 10]]))


def test_slice_negative_stride_reverses():
    out = slice_(f32([0, 1, 2, 3]), (3,), (4,), (-1,))
    assert torch.equal(out, f32([3, 2, 1, 0]))


def test_slice_zero_stride_broadcasts():
    out = slice_(f32([[7.0, 8.0]]), (0, 0), (3, 2), (0, 1))
    assert torch.equal(out, f32([[7, 8], [7, 8], [7, 8]]))


def test_slice_strict_bounds_rejects_out_of_range():
    with pytest.raises(IndexError):
        slice_(f32([0, 1, 2]), (1,), (3,), (1,))


@pytest.mark.parametrize("mode,expected", [
    # x = [10, 11, 12]; coordinates -2 .. 4
    ("WRAP", [11, 12, 10, 11, 12, 10, 11]),     # x[c mod 3]
    ("CLAMP", [10, 10, 10, 11, 12, 12, 12]),    # x[clamp(c, 0, 2)]
    ("REFLECT", [12, 11, 10, 11, 12, 11, 10]),  # c' = |c| mod 4; 4 - c' when c' >= 3
])
def test_slice_sample_modes(mode, expected):
    out = slice_(f32([10, 11, 12]), (-2,), (7,), (1,), mode=mode)
    assert torch.equal(out, f32(expected))


def test_slice_reflect_single_element_repeats():
    out = slice_(f32([5.0]), (-2,), (4,), (1,), mode="REFLECT")
    assert torch.equal(out, f32([5, 5, 5, 5]))


def test_slice_fill_uses_fill_value_input():
    fill = f32(-1.0)
    out = slice_(f32([[1, 2], [3, 4]]), (-1, 0), (3, 3), (1, 1), mode="FILL",
                 extra=(None, None, None, fill))
    assert torch.equal(out, f32([[-1, -1, -1], [1, 2, -1], [3, 4, -1]]))


def test_slice_fill_defaults_to_zero():
    out = slice_(f32([1, 2]), (-1,), (4,), (1,), mode="FILL")
    assert torch.equal(out, f32([0, 1, 2, 0]))


def test_slice_dynamic_start_size_stride_inputs():
    out = slice_(grid(3, 4), (0, 0), (1, 1), (1, 1),
                 extra=(i64([2, 3]), i64([2, 2]), i64([-1, -2])))
    # rows 2, 1; cols 3, 1
    assert torch.equal(out, f32([[11, 9], [7, 5]]))


def test_slice_axes_input_selects_dims():
    out = slice_(grid(3, 4), None, None, None,
                 extra=(i64([1]), i64([2]), i64([2]), None, i64([-1])))
    # only the last axis is sliced: cols 1, 3 of every row
    assert torch.equal(out, f32([[1, 3], [5, 7], [9, 11]]))


# -- GATHER (DEFAULT) / SELECT ----------------------------------------------------------

def gather(data, indices, axis):
    return run_one("GATHER", [data, indices], axis=axis, mode="DEFAULT", num_elementwise_dims=0)


def test_gather_default_axis1_with_matrix_indices():
    out = gather(grid(2, 3), i64([[2, 0], [1, 1]]), 1)
    # out[i, j, k] = x[i, idx[j, k]]
    assert out.shape == (2, 2, 2)
    assert torch.equal(out, f32([[[2, 0], [1, 1]], [[5, 3], [4, 4]]]))


def test_gather_scalar_index_removes_axis():
    out = gather(grid(2, 3), i64(1), 0)
    assert torch.equal(out, f32([3, 4, 5]))


@pytest.mark.parametrize("index", [3, -4])
def test_gather_index_outside_minus_n_to_n_is_an_error(index):
    with pytest.raises(IndexError):
        gather(grid(2, 3), i64([index]), 1)


def test_gather_negative_index_counts_from_the_end():
    # Note [Negative gather indices]: -1 is column 2, -3 column 0
    out = gather(grid(2, 3), i64([-1, -3]), 1)
    assert torch.equal(out, f32([[2, 0], [5, 3]]))


def test_gather_default_one_elementwise_dim():
    # nb = 1: out[b, j] = data[b, idx[b, j]] along axis 1 (axis counts the batch dim)
    data = grid(2, 3)  # [[0, 1, 2], [3, 4, 5]]
    out = run_one("GATHER", [data, i64([[2, 2], [0, 1]])], axis=1, mode="DEFAULT",
                  num_elementwise_dims=1)
    assert torch.equal(out, f32([[2, 2], [3, 4]]))


def test_gather_default_elementwise_dim_broadcasts_data():
    # data batch 1 broadcasts against indices batch 2; axis 2 of (1, 2, 3)
    data = grid(2, 3).reshape(1, 2, 3)
    out = run_one("GATHER", [data, i64([[0], [2]])], axis=2, mode="DEFAULT",
                  num_elementwise_dims=1)
    # out[b, r, j] = data[0, r, idx[b, j]]
    assert out.shape == (2, 2, 1)
    assert torch.equal(out, f32([[[0], [3]], [[2], [5]]]))


def test_select_broadcasts_condition():
    cond = torch.tensor([[True], [False]])
    out = run_one("SELECT", [cond, f32([[1, 2]]), f32([[5, 6], [7, 8]])])
    assert torch.equal(out, f32([[1, 2], [7, 8]]))


# -- FILL / PADDING ---------------------------------------------------------------------

def test_fill_linspace_static():
    out = run_one("FILL", [], shape=(4,), operation="LINSPACE", alpha=3.0, beta=-2.0,
                  to_type="INT64")
    assert out.dtype == torch.int64 and torch.equal(out, i64([3, 1, -1, -3]))


def test_fill_linspace_dynamic_inputs_per_dim_delta():
    # out[i, j] = alpha + i * delta0 + j * delta1 (the documented 2-D example)
    out = run_one("FILL", [i64([2, 3]), f32(0.0), f32([3.0, 1.0])], shape=(1, 1),
                  operation="LINSPACE", alpha=0.0, beta=1.0, to_type="FLOAT")
    assert torch.equal(out, f32([[0, 1, 2], [3, 4, 5]]))


def test_fill_linspace_dynamic_shape_static_alpha_beta():
    out = run_one("FILL", [i64([3])], shape=(1,), operation="LINSPACE", alpha=0.5, beta=0.25,
                  to_type="FLOAT")
    assert torch.equal(out, f32([0.5, 0.75, 1.0]))


def test_fill_linspace_int64_is_exact_beyond_float64():
    # alpha 2**53 + 1 is not a float64; TensorRT holds alpha/beta as int64 here
    out = run_one("FILL", [], shape=(3,), operation="LINSPACE", alpha=2**53 + 1, beta=2,
                  to_type="INT64")
    assert torch.equal(out, i64([2**53 + 1, 2**53 + 3, 2**53 + 5]))


def test_fill_linspace_int32_from_float_parameters():
    out = run_one("FILL", [], shape=(2, 2), operation="LINSPACE", alpha=1.0, beta=[10.0, 1.0],
                  to_type="INT32")
    assert out.dtype == torch.int32
    assert torch.equal(out, torch.tensor([[1, 2], [11, 12]], dtype=torch.int32))


N = 200_000  # samples for the distribution checks below


def random_fill(operation, alpha, beta, to_type="FLOAT", inputs=(), name="fill"):
    return run_one("FILL", list(inputs), shape=(N,), operation=operation, alpha=alpha, beta=beta,
                   to_type=to_type, name=name)


def test_fill_random_uniform_range_and_moments():
    out = random_fill("RANDOM_UNIFORM", -2.0, 3.0).double()
    # U[a, b): mean (a + b) / 2 = 0.5, variance (b - a)^2 / 12 = 25 / 12; the standard error
    # of the mean is sqrt(25 / 12 / N) = 0.0032, so 0.02 is > 6 standard errors.
    assert out.min() >= -2.0 and out.max() < 3.0
    assert abs(out.mean() - 0.5) < 0.02
    assert abs(out.var() - 25 / 12) < 0.03
    # each fifth of the range holds a fifth of the samples
    counts = torch.histc(out, bins=5, min=-2.0, max=3.0) / N
    assert torch.all((counts - 0.2).abs() < 0.005)


def test_fill_random_normal_moments():
    out = random_fill("RANDOM_NORMAL", 1.5, 0.5).double()
    assert abs(out.mean() - 1.5) < 0.005   # standard error 0.5 / sqrt(N) = 0.0011
    assert abs(out.std() - 0.5) < 0.005
    within_one_sigma = ((out - 1.5).abs() < 0.5).double().mean()
    assert abs(within_one_sigma - 0.682689) < 0.005  # erf(1 / sqrt(2))


def test_fill_random_alpha_beta_from_inputs_and_half_output():
    out = random_fill("RANDOM_UNIFORM", 0.0, 1.0, to_type="HALF",
                      inputs=(None, torch.tensor(10.0), torch.tensor(12.0)))
    assert out.dtype == torch.float16
    assert out.min() >= 10.0 and out.max() <= 12.0  # fp16 rounding may reach beta
    assert abs(out.double().mean() - 11.0) < 0.02


def test_fill_random_dynamic_shape_input():
    out = run_one("FILL", [i64([3, 4])], shape=(1,), operation="RANDOM_NORMAL", alpha=0.0,
                  beta=1.0, to_type="FLOAT", name="f")
    assert out.shape == (3, 4) and out.dtype == torch.float32


def test_fill_random_is_deterministic_per_layer_name():
    # Note [Random fill seed]: the same layer gives the same values on every run; two
    # layers draw different streams.
    first = random_fill("RANDOM_UNIFORM", 0.0, 1.0, name="layer_a")
    assert torch.equal(first, random_fill("RANDOM_UNIFORM", 0.0, 1.0, name="layer_a"))
    assert not torch.equal(first, random_fill("RANDOM_UNIFORM", 0.0, 1.0, name="layer_b"))


def test_padding_pads_innermost_dims_and_crops_negative():
    x = f32([[[1, 2, 3], [4, 5, 6]]])  # (1, 2, 3)
    out = run_one("PADDING", [x], pre_padding_nd=(1, -1), post_padding_nd=(0, 1))
    # rows: one zero row before; cols: drop the first, one zero after
    assert torch.equal(out, f32([[[0, 0, 0], [2, 3, 0], [5, 6, 0]]]))


def test_slice_static_axes_attribute():
    # ISliceLayer.axes = (0,): start/shape/stride list only dim 0; dim 1 is kept whole
    out = run_one("SLICE", [grid(3, 2)], start=(2,), shape=(2,), stride=(-2,),
                  mode="STRICT_BOUNDS", axes=(0,))
    assert torch.equal(out, f32([[4, 5], [0, 1]]))  # rows 2, 0
