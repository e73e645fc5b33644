"""Conformance cases: max/avg pooling (padding, strides, ceil_mode, count_include_pad,
divisor_override, unbatched) and adaptive avg/max pooling (divisible and not)."""

import torch
import torch.nn.functional as F

from ..case import Case, T

aten = torch.ops.aten
max2d, max3d = aten.max_pool2d_with_indices.default, aten.max_pool3d_with_indices.default
avg2d, avg3d = aten.avg_pool2d.default, aten.avg_pool3d.default


def _values(fn):
    """Keep only the pooled values: the indices output is not converted."""
    return lambda *a, **k: fn(*a, **k)[0]


# Exported as compile() exports Input ranges (Case.infer_dims): ATen's ceil_mode test "does
# the last window start in the padding?" is a guard export cannot prove over a named Dim.
CEIL = {"infer_dims": True}


def _max(op, args, name, **kw):
    return Case(_values(op), args, name=name, check_op=op, **kw)


CASES = [
    _max(max2d, (T((2, 3, 8, 8)), [2, 2]), "k2"),
    _max(max2d, (T((1, 2, 7, 9)), [3, 3], [2, 2], [1, 1]), "k3s2p1"),
    _max(max2d, (T((2, 2, 8, 7), dynamic=(0, 2, 3)), [3, 2], [2, 2], [1, 0], [1, 1], True),
         "ceil_mode", **CEIL),
    _max(max2d, (T((3, 6, 6), dynamic=()), [2, 2]), "unbatched"),
    _max(max3d, (T((1, 2, 4, 6, 6)), [2, 2, 2], [2, 1, 2], [0, 1, 1]), "3d"),
    Case(avg2d, (T((2, 3, 8, 8)), [2, 2]), name="k2"),
    Case(avg2d, (T((1, 2, 7, 7)), [3, 3], [2, 2], [1, 1]), name="pad_counted"),
    Case(avg2d, (T((1, 2, 7, 7)), [3, 3], [2, 2], [1, 1], False, False), name="pad_excluded"),
    Case(avg2d, (T((2, 2, 8, 7), dynamic=(0, 2, 3)), [3, 3], [2, 2], [0, 0], True),
         name="ceil_mode", **CEIL),
    Case(avg2d, (T((1, 2, 6, 6)), [2, 2], [2, 2], [0, 0], False, True, 3), name="divisor"),
    Case(avg3d, (T((1, 2, 4, 6, 6)), [2, 2, 2], [2, 2, 2], [1, 1, 1]), name="3d"),
    Case(aten._adaptive_avg_pool2d.default, (T((2, 3, 8, 6)), [4, 2]), name="divisible"),
    Case(aten._adaptive_avg_pool2d.default, (T((1, 2, 7, 5)), [3, 2]), name="uneven"),
    Case(aten._adaptive_avg_pool3d.default, (T((1, 2, 4, 5, 6)), [2, 3, 4]), name="mixed"),
    _max(aten.adaptive_max_pool2d.default, (T((2, 3, 8, 6)), [2, 3]), "divisible"),
    _max(aten.adaptive_max_pool2d.default, (T((1, 2, 7, 5)), [3, 2]), "uneven"),
    _max(aten.adaptive_max_pool3d.default, (T((1, 2, 4, 5, 6)), [2, 2, 4]), "mixed"),
]

# Spellings of kernel_size/stride/padding as models write them (Note [ATen int lists] in
# torch_trt_ref/conversion/args.py): a bare int, a one-element list, a full list and an
# empty stride (= kernel_size); the dynamic variant varies batch and spatial dims.
SPELLINGS = {"int": lambda v, nd: v, "one": lambda v, nd: [v], "full": lambda v, nd: [v] * nd}
_POOLS = {("max", 1): F.max_pool1d, ("max", 2): F.max_pool2d, ("max", 3): F.max_pool3d,
          ("avg", 1): F.avg_pool1d, ("avg", 2): F.avg_pool2d, ("avg", 3): F.avg_pool3d}
_CHECK = {("max", 1): max2d, ("max", 2): max2d, ("max", 3): max3d,
          ("avg", 1): avg2d, ("avg", 2): avg2d, ("avg", 3): avg3d}
_SPATIAL = (9, 8, 7)


def _spelled(kind: str, nd: int, spelling: str) -> Case:
    s = lambda v: SPELLINGS[spelling](v, nd)  # noqa: E731
    # torch.export specializes the length of max_pool1d's input: only its batch varies
    spatial = () if (kind, nd) == ("max", 1) else tuple(range(2, nd + 2))
    x = T((2, 3) + _SPATIAL[:nd], dynamic=(0,) + spatial)
    args = (x, [3] * nd, []) if spelling == "empty_stride" else (x, s(3), s(2), s(1))
    return Case(_POOLS[kind, nd], args, name=f"{kind}{nd}d_{spelling}",
                check_op=_CHECK[kind, nd], dtypes=(torch.float32,))


CASES += [_spelled(kind, nd, spelling) for kind in ("max", "avg") for nd in (1, 2, 3)
          for spelling in list(SPELLINGS) + ["empty_stride"]]

# Dynamic channel and spatial dims (batch, channel and spatial all vary): pooling windows
# are static, adaptive windows are computed from the runtime size.
ALL_DIMS = (0, 1, 2, 3, 4)
adaptive_avg2d, adaptive_avg3d = aten._adaptive_avg_pool2d.default, \
    aten._adaptive_avg_pool3d.default
CASES += [
    _max(max2d, (T((2, 3, 8, 7), dynamic=ALL_DIMS[:4]), [3, 3], [2, 2], [1, 1]), "dyn_all"),
    _max(max3d, (T((2, 3, 6, 7, 5), dynamic=ALL_DIMS), [2, 2, 2]), "dyn_all"),
    Case(avg2d, (T((2, 3, 8, 7), dynamic=ALL_DIMS[:4]), [3, 3], [2, 2], [1, 1]),
         name="dyn_all"),
    Case(avg3d, (T((2, 3, 6, 7, 5), dynamic=ALL_DIMS), [2, 2, 2], [2, 1, 2], [1, 0, 1]),
         name="dyn_all"),
    Case(adaptive_avg2d, (T((2, 3, 8, 7), dynamic=ALL_DIMS[:4]), [3, 2]), name="dyn_all"),
    Case(adaptive_avg2d, (T((2, 3, 8, 7), dynamic=(0, 2, 3)), [1, 1]), name="dyn_global"),
    Case(adaptive_avg2d, (T((2, 3, 5, 7), dynamic=(2,)), [7, 4]), name="dyn_upsampling"),
    Case(adaptive_avg3d, (T((2, 3, 6, 7, 5), dynamic=ALL_DIMS), [2, 3, 4]), name="dyn_all"),
    _max(aten.adaptive_max_pool2d.default, (T((2, 3, 8, 7), dynamic=ALL_DIMS[:4]), [3, 2]),
         "dyn_all"),
    _max(aten.adaptive_max_pool3d.default, (T((2, 3, 6, 7, 5), dynamic=ALL_DIMS),
                                            [2, 3, 4]), "dyn_all"),
]

# ceil_mode over dynamic batch and spatial dims (Note [ceil_mode] in
# torch_trt_ref/conversion/converters/pooling.py). The dynamic cells run each spatial size
# n at n - 1, n and n + 2, chosen so that ATen drops the last window (it would start in
# the right padding) at some of these sizes and not at others: with kernel 2, stride 3,
# padding 1, at n = 7 but not 6 or 9; with kernel 3, stride 3, padding 1, at 5 and 8 but
# not 6; with kernel 2, stride 2, padding 1, at 5 but not 6 or 8. The windows that stay
# reach past n + p at some sizes only (kernel 3, stride 2: at 6 and 8, not 5), which is
# what count_include_pad's divisor sees.
CEIL_2D = ([2, 3], [3, 2], [1, 1])  # drops at H = 7; overhangs at W = 6, 8
CEIL_3D = ([2, 3, 2], [3, 3, 2], [1, 1, 0])  # drops at D = 7, H = 5, 8
X2, X3 = T((2, 2, 7, 6), dynamic=(0, 2, 3)), T((2, 2, 7, 6, 5), dynamic=(0, 2, 3, 4))
X1 = T((3, 2, 7), dynamic=(0, 2))
CASES += [
    _max(max2d, (X2, [2, 2], [3, 2], [1, 1], [1, 1], True), "ceil_drops_last_window", **CEIL),
    _max(max3d, (X3, *CEIL_3D, [1, 1, 1], True), "ceil_mode", **CEIL),
    # torch.export specializes the length of max_pool1d's input: only its batch varies
    Case(F.max_pool1d, (T((3, 2, 7), dynamic=(0,)), 2, 3, 1, 1, True), name="max1d_ceil",
         check_op=max2d),
    Case(avg2d, (X2, *CEIL_2D, True), name="ceil_pad_counted", **CEIL),
    Case(avg2d, (X2, *CEIL_2D, True, False), name="ceil_pad_excluded", **CEIL),
    Case(avg2d, (X2, *CEIL_2D, True, True, 5), name="ceil_divisor", **CEIL),
    Case(avg3d, (X3, *CEIL_3D, True), name="ceil_pad_counted", **CEIL),
    Case(avg3d, (X3, *CEIL_3D, True, False), name="ceil_pad_excluded", **CEIL),
    Case(F.avg_pool1d, (X1, 2, 3, 1, True), name="avg1d_ceil", check_op=avg2d, **CEIL),
    Case(F.avg_pool1d, (X1, 3, 3, 0, True, False), name="avg1d_ceil_no_pad", check_op=avg2d,
         **CEIL),
]
