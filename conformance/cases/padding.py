"""Conformance cases: constant, reflection, replication and circular padding (pads on
every supported rank, negative pads that crop, padding of the dynamic dim)."""

import torch

from ..case import ALL, Case, T

aten = torch.ops.aten
ONE = (torch.float32,)  # variants whose dtype does not matter run in fp32 only
ANY = ALL + (torch.bool,)

CASES = [
    Case(aten.constant_pad_nd.default, (T((2, 3, 4)), [1, 2]), dtypes=ANY),
    Case(aten.constant_pad_nd.default, (T((2, 3, 4)), [1, 0, 2, 1], 1.5), name="value", dtypes=ONE),
    Case(aten.constant_pad_nd.default, (T((2, 3, 4)), [-1, 2]), name="crop", dtypes=ONE),
    Case(aten.constant_pad_nd.default, (T((2, 3, 4)), [0, 0, 0, 0, 1, 2], -3),
         name="dynamic_dim", dtypes=ALL),
    Case(aten.reflection_pad1d.default, (T((2, 5)), [2, 3]), dtypes=ALL),
    Case(aten.reflection_pad1d.default, (T((2, 3, 5)), [0, 4]), name="batched", dtypes=ONE),
    Case(aten.reflection_pad2d.default, (T((2, 3, 4, 5)), [1, 2, 3, 0]), dtypes=ALL),
    Case(aten.reflection_pad3d.default, (T((1, 2, 3, 4, 3)), [1, 1, 2, 0, 0, 2])),
    Case(aten.replication_pad1d.default, (T((2, 5)), [3, 1]), dtypes=ALL),
    Case(aten.replication_pad2d.default, (T((2, 3, 4, 5)), [2, 0, 1, 3]), dtypes=ALL),
    Case(aten.replication_pad3d.default, (T((1, 2, 3, 4, 3)), [1, 2, 0, 1, 2, 0])),
    Case(aten._pad_circular.default, (T((2, 3, 5)), [2, 1]), dtypes=ALL),
    Case(aten._pad_circular.default, (T((2, 3, 4, 5)), [1, 2, 2, 0]), name="2d", dtypes=ONE),
    Case(aten._pad_circular.default, (T((2, 3, 5)), [-1, 2]), name="crop", dtypes=ONE),
]
