"""The reference CONVOLUTION layer against torch.nn.functional.conv{1,2,3}d over random
stride, padding (larger than the input too), dilation, kernel, groups and input sizes, in
every TensorRT PaddingMode. The oracle is torch: each mode is written as the torch call that
computes it (its own ``padding=`` or ``padding="same"`` where one exists, else zero padding
by ``F.pad`` with the sizes the mode's definition gives), never through our layer's code."""

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from torch_trt_ref.runtime.reference.registry import REFERENCE_LAYERS

CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}
MODES = ("EXPLICIT_ROUND_DOWN", "EXPLICIT_ROUND_UP", "SAME_UPPER", "SAME_LOWER")


@st.composite
def conv_cases(draw):
    nd = draw(st.integers(1, 3))
    big = 3 if nd == 3 else 9
    dims = [dict(size=draw(st.integers(1, big)), kernel=draw(st.integers(1, 4)),
                 stride=draw(st.integers(1, 9)), dilation=draw(st.integers(1, 3)),
                 pre=draw(st.integers(0, 6)), post=draw(st.integers(0, 6)))
            for _ in range(nd)]
    groups = draw(st.integers(1, 2))
    return dict(nd=nd, dims=dims, mode=draw(st.sampled_from(MODES)), groups=groups,
                in_per_group=draw(st.integers(1, 2)), out_per_group=draw(st.integers(1, 2)),
                batch=draw(st.integers(1, 2)), bias=draw(st.booleans()),
                seed=draw(st.integers(0, 2**16)))


def _flip(t, nd):
    return t.flip(list(range(t.dim() - nd, t.dim())))


def torch_oracle(x, w, b, case):
    """What torch computes for ``case`` (None where torch has no output: a window larger
    than the padded input)."""
    nd, dims, mode, groups = case["nd"], case["dims"], case["mode"], case["groups"]
    stride = [d["stride"] for d in dims]
    dilation = [d["dilation"] for d in dims]
    reach = [1 + d["dilation"] * (d["kernel"] - 1) for d in dims]
    conv = CONV[nd]
    if mode.startswith("SAME") and all(s == 1 for s in stride):
        # torch's padding="same" puts the odd padding element at the back (SAME_UPPER);
        # SAME_LOWER is SAME_UPPER of the input and kernel reversed, reversed back.
        if mode == "SAME_UPPER":
            return conv(x, w, b, 1, "same", dilation, groups)
        return _flip(conv(_flip(x, nd), _flip(w, nd), b, 1, "same", dilation, groups), nd)
    pads = []
    for d, dk in zip(dims, reach):
        if mode.startswith("SAME"):  # ONNX auto_pad: O = ceil(I / S)
            total = max((math.ceil(d["size"] / d["stride"]) - 1) * d["stride"] + dk
                        - d["size"], 0)
            head = total // 2 if mode == "SAME_UPPER" else total - total // 2
            pads.append((head, total - head))
        elif mode == "EXPLICIT_ROUND_UP":  # ceil((M - DK) / S) = floor((M - DK + S - 1) / S)
            pads.append((d["pre"], d["post"] + d["stride"] - 1))
        else:
            pads.append((d["pre"], d["post"]))
    if any(i + a + z < dk for i, (a, z), dk in zip(x.shape[2:], pads, reach)):
        return None
    if mode == "EXPLICIT_ROUND_DOWN" and all(a == z for a, z in pads):
        return conv(x, w, b, stride, [a for a, _ in pads], dilation, groups)
    padded = F.pad(x, [p for pair in reversed(pads) for p in pair])
    return conv(padded, w, b, stride, 0, dilation, groups)


@pytest.mark.filterwarnings("ignore:Using padding='same'")
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conv_cases())
def test_reference_convolution_equals_torch_conv(case):
    gen = torch.Generator().manual_seed(case["seed"])
    dims, groups = case["dims"], case["groups"]
    in_c, out_c = groups * case["in_per_group"], groups * case["out_per_group"]
    kernel = [d["kernel"] for d in dims]
    x = torch.randn(case["batch"], in_c, *[d["size"] for d in dims], generator=gen,
                    dtype=torch.float64)
    w = torch.randn(out_c, case["in_per_group"], *kernel, generator=gen, dtype=torch.float64)
    b = torch.randn(out_c, generator=gen, dtype=torch.float64) if case["bias"] else None
    want = torch_oracle(x, w, b, case)
    if want is None:
        return
    (got,) = REFERENCE_LAYERS["CONVOLUTION"].run(
        [x], num_output_maps=out_c, kernel_size_nd=kernel,
        stride_nd=[d["stride"] for d in dims], dilation_nd=[d["dilation"] for d in dims],
        num_groups=groups, pre_padding=[d["pre"] for d in dims],
        post_padding=[d["post"] for d in dims], padding_mode=case["mode"], kernel=w.flatten(),
        bias=b)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


def test_stride_larger_than_padded_input_is_not_a_crash():
    """Issue 21: Conv1d(k=1, stride=8, padding=2) on 3 elements reads one window; the rows
    past it (more than the input holds) were cropped by one F.pad and raised."""
    x = torch.randn(1, 1, 3, dtype=torch.float64)
    w = torch.ones(1, 1, 1, dtype=torch.float64)
    (got,) = REFERENCE_LAYERS["CONVOLUTION"].run(
        [x], num_output_maps=1, kernel_size_nd=[1], stride_nd=[8], dilation_nd=[1],
        num_groups=1, pre_padding=[2], post_padding=[2], padding_mode="EXPLICIT_ROUND_DOWN",
        kernel=w.flatten(), bias=None)
    torch.testing.assert_close(got, F.conv1d(x, w, None, 8, 2))
