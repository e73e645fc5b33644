"""Reference REDUCE, SOFTMAX, TOPK, CUMULATIVE, GATHER, SCATTER and NON_ZERO layers against
hand-derived values (each expectation was worked out by hand from TensorRT's documented
semantics, in the comment beside it)."""

import math

import pytest
import torch

from .conftest import run


def t(values, dtype=torch.float32):
    return torch.tensor(values, dtype=dtype)


X = t([[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]])


@pytest.mark.parametrize("op,axes,keep,expected", [
    ("SUM", 0b10, False, [2.0, 3.0]),            # 1-2+3, 4+5-6
    ("SUM", 0b01, True, [[5.0, 3.0, -3.0]]),     # column sums, rank kept
    ("PROD", 0b10, False, [-6.0, -120.0]),       # 1*-2*3, 4*5*-6
    ("MAX", 0b11, False, 5.0),                   # over everything
    ("MIN", 0b10, True, [[-2.0], [-6.0]]),
    ("AVG", 0b10, False, [2.0 / 3.0, 1.0]),      # 2/3, 3/3
])
def test_reduce(op, axes, keep, expected):
    (out,) = run("REDUCE", [X], op=op, axes=axes, keep_dims=keep)
    torch.testing.assert_close(out, t(expected))


def test_reduce_keeps_integer_type():
    # TensorRT's SUM of int32 is int32 (torch alone would widen to int64): 7+8 = 15.
    (out,) = run("REDUCE", [t([[7, 8]], torch.int32)], op="SUM", axes=0b10, keep_dims=False)
    assert out.dtype == torch.int32 and out.tolist() == [15]


def test_softmax_axis():
    # exp(0)/(exp(0)+exp(ln 3)) = 1/4 and 3/4 along the last axis.
    (out,) = run("SOFTMAX", [t([[0.0, math.log(3.0)]])], axes=0b10)
    torch.testing.assert_close(out, t([[0.25, 0.75]]))


def test_topk_values_and_int64_indices():
    # largest two of [3, 9, 1, 7] are 9 (at 1) and 7 (at 3), in that order.
    values, indices = run("TOPK", [t([[3.0, 9.0, 1.0, 7.0]])], op="MAX", k=2, axes=0b10,
                          indices_type="INT64")
    assert values.tolist() == [[9.0, 7.0]] and indices.tolist() == [[1, 3]]
    assert indices.dtype == torch.int64


def test_topk_min_with_runtime_k_defaults_to_int32_indices():
    # input 1 overrides k = 1 with 3: smallest three are 1 (2), 3 (0), 7 (3).
    values, indices = run("TOPK", [t([[3.0, 9.0, 1.0, 7.0]]), t(3, torch.int32)], op="MIN",
                          k=1, axes=0b10, indices_type=None)
    assert values.tolist() == [[1.0, 3.0, 7.0]] and indices.tolist() == [[2, 0, 3]]
    assert indices.dtype == torch.int32


def test_topk_ties_keep_the_lower_index_first():
    # Note [Top-k ties]: [5, 7, 5, 7] -> MAX k=3: 7 (index 1), 7 (index 3), 5 (index 0)
    values, indices = run("TOPK", [t([[5.0, 7.0, 5.0, 7.0]])], op="MAX", k=3, axes=0b10,
                          indices_type="INT64")
    assert values.tolist() == [[7.0, 7.0, 5.0]] and indices.tolist() == [[1, 3, 0]]
    values, indices = run("TOPK", [t([[5.0, 7.0, 5.0, 7.0]])], op="MIN", k=3, axes=0b10,
                          indices_type="INT64")
    assert values.tolist() == [[5.0, 5.0, 7.0]] and indices.tolist() == [[0, 2, 1]]


def test_topk_along_axis_zero():
    values, indices = run("TOPK", [t([[1.0, 8.0], [4.0, 2.0], [3.0, 9.0]])], op="MAX", k=1,
                          axes=0b01, indices_type="INT32")
    assert values.tolist() == [[4.0, 9.0]] and indices.tolist() == [[1, 2]]


def test_reduce_integer_average_truncates():
    # Note [Integer average]: (1 + 2) / 2 = 1.5 -> 1; (-1 + -2) / 2 = -1.5 -> -1
    (out,) = run("REDUCE", [t([[1, 2], [-1, -2]], torch.int32)], op="AVG", axes=0b10,
                 keep_dims=False)
    assert out.dtype == torch.int32 and out.tolist() == [1, -1]


def test_cumulative_exclusive_is_a_shift_not_a_subtraction():
    # [inf, 1, 2]: exclusive sums are 0, inf, inf (subtracting x would give inf - inf = nan)
    (out,) = run("CUMULATIVE", [t([math.inf, 1.0, 2.0]), t(0, torch.int32)], op="SUM",
                 exclusive=True, reverse=False)
    assert out.tolist() == [0.0, math.inf, math.inf]


def test_cumulative_along_last_axis_of_matrix_with_negative_axis():
    (out,) = run("CUMULATIVE", [t([[1, 2, 3], [4, 5, 6]], torch.int64), t(-1, torch.int32)],
                 op="SUM", exclusive=False, reverse=True)
    assert out.tolist() == [[6, 5, 3], [15, 11, 6]]


@pytest.mark.parametrize("exclusive,reverse,expected", [
    (False, False, [1, 3, 6, 10]),   # prefix sums of [1, 2, 3, 4]
    (True, False, [0, 1, 3, 6]),     # sums of elements strictly before
    (False, True, [10, 9, 7, 4]),    # suffix sums
    (True, True, [9, 7, 4, 0]),      # sums of elements strictly after
])
def test_cumulative(exclusive, reverse, expected):
    (out,) = run("CUMULATIVE", [t([1, 2, 3, 4], torch.int32), t(0, torch.int32)], op="SUM",
                 exclusive=exclusive, reverse=reverse)
    assert out.dtype == torch.int32 and out.tolist() == expected


DATA = t([[10.0, 11.0, 12.0], [20.0, 21.0, 22.0]])


def test_gather_default():
    # axis 1, indices [[2, 0]]: output [2, 1, 2] = rows with columns 2 then 0.
    (out,) = run("GATHER", [DATA, t([[2, 0]], torch.int64)], axis=1, mode="DEFAULT",
                 num_elementwise_dims=0)
    assert out.tolist() == [[[12.0, 10.0]], [[22.0, 20.0]]]


def test_gather_element():
    # out[i][j] = data[i][idx[i][j]]: row 0 takes cols 1, 1; row 1 takes cols 0, 2.
    (out,) = run("GATHER", [DATA, t([[1, 1], [0, 2]], torch.int32)], axis=1, mode="ELEMENT",
                 num_elementwise_dims=0)
    assert out.tolist() == [[11.0, 11.0], [20.0, 22.0]]


def test_gather_nd():
    # index tuples (1, 2) and (0, 0) pick 22 and 10.
    (out,) = run("GATHER", [DATA, t([[1, 2], [0, 0]], torch.int64)], axis=0, mode="ND",
                 num_elementwise_dims=0)
    assert out.tolist() == [22.0, 10.0]


@pytest.mark.parametrize("mode,index", [("DEFAULT", [-4]), ("ELEMENT", [[0, 3, 0]]),
                                        ("ND", [[0, -4]]), ("ND", [[2, 0]])])
def test_gather_rejects_indices_outside_minus_n_to_n(mode, index):
    with pytest.raises(IndexError):
        run("GATHER", [DATA, t(index, torch.int64)], axis=1 if mode != "ND" else 0,
            mode=mode, num_elementwise_dims=0)


def test_scatter_element():
    # axis 1: out[i][idx[i][j]] = upd[i][j]; row 0 writes 1 to col 2, row 1 writes 2 to col 0.
    (out,) = run("SCATTER", [torch.zeros(2, 3), t([[2], [0]], torch.int64), t([[1.0], [2.0]])],
                 mode="ELEMENT", axis=1)
    assert out.tolist() == [[0.0, 0.0, 1.0], [2.0, 0.0, 0.0]]


def test_scatter_nd_slices():
    # index tuple (1,) replaces row 1 of a [2, 3] tensor with the update row.
    (out,) = run("SCATTER", [torch.zeros(2, 3), t([[1]], torch.int32), t([[7.0, 8.0, 9.0]])],
                 mode="ND", axis=0)
    assert out.tolist() == [[0.0, 0.0, 0.0], [7.0, 8.0, 9.0]]


@pytest.mark.parametrize("data_shape,index_shape", [
    ((2, 3), (2, 1)), ((2, 0), (2, 1)), ((0, 3), (0, 1)), ((2, 3), (0, 2)),
    ((2, 3), (1, 0)), ((2, 3), (0, 0)), ((3, 0, 2), (2, 1)), ((4, 3), (2, 2, 1))])
def test_scatter_nd_zero_sizes_match_onnx_reference(data_shape, index_shape):
    """ScatterND with zero-size data, indices or slices (and empty index tuples) against
    the ONNX reference implementation (onnx.reference, not ours); indices are distinct."""
    from onnx import helper
    from onnx.reference import ReferenceEvaluator

    k, n = index_shape[-1], math.prod(index_shape[:-1])
    flat = torch.randperm(math.prod(data_shape[:k]) or 1)[:n] if k else torch.zeros(n)
    tuples = [torch.tensor(divmod_all(int(i), data_shape[:k])) for i in flat]
    indices = (torch.stack(tuples) if tuples else torch.zeros(0, k)).long()
    indices = indices.reshape(*index_shape)
    data = torch.randn(data_shape)
    updates = torch.randn(*index_shape[:-1], *data_shape[k:])
    node = helper.make_node("ScatterND", ["d", "i", "u"], ["o"])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(x, 0, None)
                                            for x in "diu"],
                              [helper.make_tensor_value_info("o", 0, None)])
    expected = ReferenceEvaluator(helper.make_model(graph)).run(
        None, {"d": data.numpy(), "i": indices.numpy(), "u": updates.numpy()})[0]
    (out,) = run("SCATTER", [data, indices, updates], mode="ND", axis=0)
    assert out.shape == expected.shape
    assert torch.equal(out, torch.from_numpy(expected))


def divmod_all(flat: int, shape) -> list[int]:
    """The multi-index of ``flat`` in ``shape`` (row-major)."""
    out = []
    for size in reversed(shape):
        flat, r = divmod(flat, size)
        out.append(r)
    return out[::-1]


def test_scatter_nd_elements():
    # full index tuples (0, 2) and (1, 0) write single elements 5 and 6.
    (out,) = run("SCATTER", [torch.zeros(2, 3), t([[0, 2], [1, 0]], torch.int64), t([5.0, 6.0])],
                 mode="ND", axis=0)
    assert out.tolist() == [[0.0, 0.0, 5.0], [6.0, 0.0, 0.0]]


def test_gather_element_and_nd_negative_indices_count_from_the_end():
    # Note [Negative gather indices]: -1 is the last column (or row), -3 the first column
    (out,) = run("GATHER", [DATA, t([[-1], [-3]], torch.int64)], axis=1, mode="ELEMENT",
                 num_elementwise_dims=0)
    assert out.tolist() == [[12.0], [20.0]]
    (out,) = run("GATHER", [DATA, t([[-1, -2]], torch.int64)], axis=0, mode="ND",
                 num_elementwise_dims=0)
    assert out.tolist() == [21.0]  # (1, 1)


def test_gather_nd_with_one_batch_dim():
    # nb = 1: out[b] = data[b, idx[b, 0]]; row 0 takes col 2, row 1 col 0
    (out,) = run("GATHER", [DATA, t([[2], [0]], torch.int64)], axis=0, mode="ND",
                 num_elementwise_dims=1)
    assert out.tolist() == [12.0, 20.0]


def test_scatter_negative_indices_count_from_the_end():
    # -1 is column 2 of row 0; -3 is column 0 of row 1
    (out,) = run("SCATTER", [torch.zeros(2, 3), t([[-1], [-3]], torch.int64),
                             t([[1.0], [2.0]])], mode="ELEMENT", axis=1)
    assert out.tolist() == [[0.0, 0.0, 1.0], [2.0, 0.0, 0.0]]


@pytest.mark.parametrize("mode,index", [("ELEMENT", [[-4], [0]]), ("ELEMENT", [[3], [0]]),
                                        ("ND", [[2, 0]])])
def test_scatter_rejects_indices_outside_minus_n_to_n(mode, index):
    updates = t([[1.0], [2.0]]) if mode == "ELEMENT" else t([1.0])
    with pytest.raises(IndexError):
        run("SCATTER", [torch.zeros(2, 3), t(index, torch.int64), updates], mode=mode, axis=1)


def test_non_zero():
    # non-zeros of [[0, 3], [-1, 0]] sit at (0, 1) and (1, 0): columns of a [rank, count] matrix.
    (out,) = run("NON_ZERO", [t([[0.0, 3.0], [-1.0, 0.0]])], indices_type="INT64")
    assert out.dtype == torch.int64 and out.tolist() == [[0, 1], [1, 0]]


def test_non_zero_bool_default_int32_and_empty():
    (out,) = run("NON_ZERO", [t([False, False], torch.bool)], indices_type=None)
    assert out.dtype == torch.int32 and tuple(out.shape) == (1, 0)
