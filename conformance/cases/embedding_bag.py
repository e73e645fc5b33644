"""Conformance cases: embedding_bag in sum / mean / max mode, with empty bags,
per_sample_weights, include_last_offset and padding_idx, through each overload that reaches
conversion (_embedding_bag, _embedding_bag_forward_only, and embedding_bag.default /
.padding_idx where the user disables their decomposition)."""

import torch
import torch.nn.functional as F

from ..case import Case, T, W

aten = torch.ops.aten
I64 = torch.int64
SUM, MEAN, MAX = 0, 1, 2
WEIGHT = W((10, 4))
INDICES = T((8,), I64, low=0, high=9)  # dynamic length 7..10 (min_shape_delta=1)
OFFSETS = T((4,), I64, values=[0, 3, 3, 5])  # bag 1 is empty
PADDED = T((8,), I64, values=[1, 4, 2, 4, 4, 3, 2, 9])
KEEP_BAG = {"disabled_decompositions": {"aten.embedding_bag"}}


def bags(weight, indices, offsets, mode="sum", per_sample_weights=None, padding_idx=None):
    """F.embedding_bag, which exports as aten.embedding_bag.padding_idx."""
    return F.embedding_bag(indices, weight, offsets, mode=mode,
                           per_sample_weights=per_sample_weights, padding_idx=padding_idx)


def first(op):
    def bag_output(*args, **kwargs):
        return op(*args, **kwargs)[0]

    bag_output.__name__ = f"{op.__name__}_output"
    return bag_output


CASES = [
    Case(first(aten._embedding_bag.default), (WEIGHT, INDICES, OFFSETS), {"mode": SUM},
         check_op=aten._embedding_bag.default, name="sum", min_shape_delta=1),
    Case(first(aten._embedding_bag.default), (WEIGHT, INDICES, OFFSETS), {"mode": MEAN},
         check_op=aten._embedding_bag.default, name="mean",
         min_shape_delta=1),
    Case(first(aten._embedding_bag.default), (WEIGHT, INDICES, OFFSETS), {"mode": MAX},
         check_op=aten._embedding_bag.default, name="max",
         min_shape_delta=1),
    Case(first(aten._embedding_bag.default),
         (WEIGHT, INDICES, OFFSETS, False, SUM, False, T((8,), low=0.0, high=2.0)),
         check_op=aten._embedding_bag.default, name="per_sample_weights",
         min_shape_delta=1),
    Case(first(aten._embedding_bag.default),
         (WEIGHT, T((8,), I64, low=0, high=9), T((4,), I64, values=[0, 3, 3, 8])),
         {"mode": MEAN, "include_last_offset": True}, check_op=aten._embedding_bag.default,
         name="include_last_offset", dynamic=False),
    Case(first(aten._embedding_bag.default), (WEIGHT, PADDED, OFFSETS),
         {"mode": MEAN, "padding_idx": 4}, check_op=aten._embedding_bag.default,
         name="padding_idx"),
    Case(first(aten._embedding_bag_forward_only.default), (WEIGHT, INDICES, OFFSETS),
         {"mode": MAX}, check_op=aten._embedding_bag_forward_only.default, min_shape_delta=1),
    Case(first(aten.embedding_bag.default), (WEIGHT, INDICES, OFFSETS), {"mode": SUM},
         check_op=aten.embedding_bag.default, settings=KEEP_BAG, min_shape_delta=1),
    Case(bags, (WEIGHT, PADDED, OFFSETS), {"mode": "mean", "padding_idx": 2},
         check_op=aten.embedding_bag.padding_idx, settings=KEEP_BAG),
]
