"""Reference SQUEEZE, UNSQUEEZE, ONE_HOT, REVERSE_SEQUENCE and ASSERTION layers against
hand-derived values worked out from TensorRT's documented semantics (the reasoning is in the
comment beside each expectation)."""

import pytest
import torch

from .conftest import f32, run


def i64(values):
    return torch.tensor(values, dtype=torch.int64)


def i32(values):
    return torch.tensor(values, dtype=torch.int32)


# -- SQUEEZE / UNSQUEEZE ----------------------------------------------------------------

@pytest.mark.parametrize("shape,axes,expected", [
    ((1, 3, 1, 2), [0], (3, 1, 2)),
    ((1, 3, 1, 2), [0, 2], (3, 2)),
    ((1, 3, 1, 2), [-2], (1, 3, 2)),      # -2 + rank 4 = dim 2
    ((1, 3, 1, 2), [2, -4], (3, 2)),      # order of axes does not matter
    ((1,), [0], ()),                      # down to a scalar
])
def test_squeeze_removes_listed_unit_dims(shape, axes, expected):
    x = torch.arange(torch.Size(shape).numel(), dtype=torch.float32).reshape(shape)
    (out,) = run("SQUEEZE", [x, i64(axes)])
    assert out.shape == expected
    assert torch.equal(out.flatten(), x.flatten())  # a reshape: element order kept


def test_squeeze_without_axes_removes_every_unit_dim():
    (out,) = run("SQUEEZE", [torch.zeros(1, 2, 1, 0, 1), None])
    assert out.shape == (2, 0)  # zero-sized dims are kept


def test_squeeze_of_a_non_unit_dim_is_an_error():
    with pytest.raises(ValueError):
        run("SQUEEZE", [torch.zeros(1, 3), i32([1])])


@pytest.mark.parametrize("shape,axes,expected", [
    ((3, 2), [0], (1, 3, 2)),
    ((3, 2), [2], (3, 2, 1)),
    ((3, 2), [-1], (3, 2, 1)),             # -1 + output rank 3 = 2
    ((3, 2), [0, 3], (1, 3, 2, 1)),        # positions in the output of rank 4
    ((3, 2), [1, -2], (3, 1, 1, 2)),       # -2 + output rank 4 = 2: dims 1 and 2 new
    ((), [0, 1], (1, 1)),
])
def test_unsqueeze_inserts_unit_dims_at_output_positions(shape, axes, expected):
    x = torch.arange(torch.Size(shape).numel(), dtype=torch.float32).reshape(shape)
    (out,) = run("UNSQUEEZE", [x, i64(axes)])
    assert out.shape == expected
    assert torch.equal(out.flatten(), x.flatten())


# -- ONE_HOT ----------------------------------------------------------------------------

def test_one_hot_last_axis():
    # output[i, indices[i]] = on (7), everything else off (-1)
    (out,) = run("ONE_HOT", [i32([0, 2, 1]), f32([-1.0, 7.0]), i32(3)], axis=-1)
    assert torch.equal(out, f32([[7, -1, -1], [-1, -1, 7], [-1, 7, -1]]))


def test_one_hot_axis_zero_puts_depth_first():
    # output[indices[i], i] = on
    (out,) = run("ONE_HOT", [i32([0, 2]), f32([0.0, 1.0]), i32(3)], axis=0)
    assert torch.equal(out, f32([[1, 0], [0, 0], [0, 1]]))


def test_one_hot_middle_axis_of_matrix_indices():
    idx = i32([[1, 0], [0, 1]])
    (out,) = run("ONE_HOT", [idx, i64([0, 5]), i32(2)], axis=1)
    # out[i, c, j] = 5 if idx[i, j] == c
    assert out.dtype == torch.int64  # the type of values
    assert torch.equal(out, i64([[[0, 5], [5, 0]], [[5, 0], [0, 5]]]))


def test_one_hot_negative_and_out_of_range_indices():
    # depth 3: -1 means 2, -3 means 0; 3 and -4 are out of range and give an all-off row
    (out,) = run("ONE_HOT", [i32([-1, -3, 3, -4]), f32([0.0, 1.0]), i32(3)], axis=-1)
    assert torch.equal(out, f32([[0, 0, 1], [1, 0, 0], [0, 0, 0], [0, 0, 0]]))


# -- REVERSE_SEQUENCE -------------------------------------------------------------------

def test_reverse_sequence_time_major():
    # x[t, b]: sequence_axis 0, batch_axis 1; batch 0 reverses its first 3 steps, batch 1
    # its first 1 (no change), batch 2 all 4.
    x = f32([[0, 10, 20], [1, 11, 21], [2, 12, 22], [3, 13, 23]])
    (out,) = run("REVERSE_SEQUENCE", [x, i32([3, 1, 4])], batch_axis=1, sequence_axis=0)
    assert torch.equal(out, f32([[2, 10, 23], [1, 11, 22], [0, 12, 21], [3, 13, 20]]))


def test_reverse_sequence_batch_major_with_trailing_dim():
    # x[b, t, c]; batch 0 reverses 2 steps, batch 1 all 3
    x = torch.arange(12, dtype=torch.float32).reshape(2, 3, 2)
    (out,) = run("REVERSE_SEQUENCE", [x, i64([2, 3])], batch_axis=0, sequence_axis=1)
    expected = f32([[[2, 3], [0, 1], [4, 5]], [[10, 11], [8, 9], [6, 7]]])
    assert torch.equal(out, expected)


# -- ASSERTION --------------------------------------------------------------------------

def test_assertion_passes_when_all_true_and_has_no_output():
    assert run("ASSERTION", [torch.tensor([True, True])], message="shapes agree") == ()


def test_assertion_raises_with_the_layer_message():
    with pytest.raises(AssertionError, match="batch must be positive"):
        run("ASSERTION", [torch.tensor([True, False])], message="batch must be positive")


# -- through a real TensorRT network: the snapshot reads each kind's attributes, and
# TensorRT's inferred shapes and dtypes agree with ours (run_snapshot checks both) -------

def run_network(build, feeds):
    import tensorrt_rtx as trt

    from torch_trt_ref.runtime.reference.executor import run_snapshot
    from torch_trt_ref.runtime.snapshot import take_snapshot

    net = trt.Builder(trt.Logger(trt.Logger.ERROR)).create_network(0)
    inputs = {name: net.add_input(name, dtype, tuple(value.shape))
              for name, (dtype, value) in feeds.items()}
    for out in build(net, inputs):
        net.mark_output(out)
    snapshot = take_snapshot(net, {})
    return run_snapshot(snapshot, {name: value for name, (_, value) in feeds.items()})


def test_network_squeeze_unsqueeze_one_hot_reverse_sequence():
    import tensorrt_rtx as trt

    def build(net, x):
        axes = net.add_constant((1,), trt.Weights(i64([1]).numpy())).get_output(0)
        unsq = net.add_unsqueeze(x["idx"], axes).get_output(0)          # (3,) -> (3, 1)
        sq = net.add_squeeze(unsq, axes).get_output(0)                  # back to (3,)
        depth = net.add_constant((), trt.Weights(i32([3]).numpy())).get_output(0)
        hot = net.add_one_hot(sq, x["values"], depth, -1).get_output(0)  # (3, 3)
        lens = net.add_constant((3,), trt.Weights(i32([3, 0, 2]).numpy())).get_output(0)
        rev = net.add_reverse_sequence(hot, lens)
        rev.batch_axis, rev.sequence_axis = 0, 1
        return [unsq, rev.get_output(0)]

    unsq, out = run_network(build, {"idx": (trt.int32, i32([2, 0, 1])),
                                    "values": (trt.float32, f32([0.0, 1.0]))})
    assert unsq.shape == (3, 1)
    # one-hot rows: [0,0,1], [1,0,0], [0,1,0]; reverse the first 3, 0, 2 entries of each
    assert torch.equal(out, f32([[1, 0, 0], [1, 0, 0], [1, 0, 0]]))


def test_network_scale_fill_and_einsum():
    import numpy as np
    import tensorrt_rtx as trt

    def build(net, x):
        scale = net.add_scale_nd(x["x"], trt.ScaleMode.CHANNEL, np.array([1.0, -1.0], np.float32),
                                 np.array([2.0, 3.0], np.float32), None, 1).get_output(0)
        fill = net.add_fill((2, 2), trt.FillOperation.RANDOM_UNIFORM, trt.float32)
        fill.alpha, fill.beta = 5.0, 6.0
        ein = net.add_einsum([x["x"], x["x"]], "bcw,bcw->b").get_output(0)
        return [scale, fill.get_output(0), ein]

    x = torch.arange(6, dtype=torch.float32).reshape(1, 2, 3)
    scaled, random, ein = run_network(build, {"x": (trt.float32, x)})
    # channel 0: 2x + 1; channel 1: 3x - 1
    assert torch.equal(scaled, f32([[[1, 3, 5], [8, 11, 14]]]))
    assert random.shape == (2, 2) and bool(((random >= 5) & (random < 6)).all())
    assert torch.equal(ein, f32([55.0]))  # 0 + 1 + 4 + ... + 25


def test_network_assertion_message():
    import tensorrt_rtx as trt

    def build(net, x):
        net.add_assertion(x["ok"], "ok must hold")
        return [net.add_identity(x["ok"]).get_output(0)]

    run_network(build, {"ok": (trt.bool, torch.tensor([True]))})
    with pytest.raises(AssertionError, match="ok must hold"):
        run_network(build, {"ok": (trt.bool, torch.tensor([False]))})


def test_network_empty_constant_concatenated():
    # TensorRT gives an empty constant's weights back as an empty array (OpInfo's
    # combinations sample with r > n builds one): the snapshot keeps it as zero values.
    import tensorrt_rtx as trt

    def build(net, x):
        empty = net.add_constant((0, 2), trt.Weights(trt.float32))
        cat = net.add_concatenation([empty.get_output(0), x["x"]])
        cat.axis = 0
        return [empty.get_output(0), cat.get_output(0)]

    x = f32([[1.0, 2.0]])
    empty, out = run_network(build, {"x": (trt.float32, x)})
    assert empty.shape == (0, 2) and empty.dtype == torch.float32
    assert torch.equal(out, x)
