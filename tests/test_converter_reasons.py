"""Variants the new converters (issue 16) do not take come back with a reason naming why,
not a conversion failure: outputs that cannot be produced, training-mode randomness,
limits of the TensorRT layers used."""

import pytest
import torch

from torch_trt_ref.capture import export_program
from torch_trt_ref.compiler import lower_program
from torch_trt_ref.partitioning.capability import check_node
from torch_trt_ref.settings import CompilationSettings

aten = torch.ops.aten
Q = torch.randn(1, 2, 4, 8)


class Fn(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


def reason_for(fn, args, target):
    settings = CompilationSettings()
    gm = lower_program(export_program(Fn(fn), args, {}, None), settings)
    (node,) = [n for n in gm.graph.nodes if n.target == target]
    return check_node(node, settings)


CASES = {
    "dropout_train": (lambda x: aten.native_dropout.default(x, 0.5, True),
                      (torch.randn(3, 4),), aten.native_dropout.default, "training-mode"),
    "flash_debug_mask": (lambda q: aten._scaled_dot_product_flash_attention.default(q, q, q)[8],
                         (Q,), aten._scaled_dot_product_flash_attention.default, "output 8"),
    "efficient_padded_lse": (
        lambda q: aten._scaled_dot_product_efficient_attention.default(q, q, q, None, True)[1],
        (Q,), aten._scaled_dot_product_efficient_attention.default, "output 1"),
    "bag_offset2bag": (
        lambda i, o: aten._embedding_bag.default(torch.ones(5, 2), i, o)[1],
        (torch.tensor([0, 1, 2]), torch.tensor([0, 2])), aten._embedding_bag.default,
        "offset2bag"),
    "resize_grows": (lambda x: aten.resize_.default(x.clone(), [4, 4]), (torch.randn(2, 3),),
                     aten.resize.default, "uninitialized"),
    "randperm_too_long": (lambda x: torch.randperm(5000) + x, (torch.zeros(1, dtype=torch.int64),),
                          aten.randperm.default, "3840"),
    "randint_too_wide": (lambda x: torch.randint(0, 2**30, (3,)) + x,
                         (torch.zeros(1, dtype=torch.int64),), aten.randint.low, "2**24"),
}


@pytest.mark.parametrize("name", CASES)
def test_unsupported_variant_gives_its_reason(name):
    fn, args, target, phrase = CASES[name]
    reason = reason_for(fn, args, target)
    assert reason is not None and phrase in reason, reason
