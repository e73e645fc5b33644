"""A small library for tests/test_library_ops.py: it registers two ops with torch.library,
one with ``custom_op`` and one with ``Library.define``, as libraries such as transformers do."""

import torch


@torch.library.custom_op("ttrt_test_lib::scale_add", mutates_args=())
def scale_add(x: torch.Tensor, k: float) -> torch.Tensor:
    return x * k + 1


@scale_add.register_fake
def _(x, k):
    return torch.empty_like(x)


LIB = torch.library.Library("ttrt_test_lib", "FRAGMENT")
LIB.define("twice(Tensor x) -> Tensor")
LIB.impl("twice", lambda x: x * 2, "CompositeExplicitAutograd")


class UsesLibraryOps(torch.nn.Module):
    def forward(self, x):
        y = torch.ops.ttrt_test_lib.scale_add(torch.relu(x) * 2, 3.0)
        return torch.ops.ttrt_test_lib.twice(y - 1) + x
