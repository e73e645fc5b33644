"""Conformance cases: pairwise distances (_cdist_forward with p = 0, 1, 2, 3, inf and
broadcast batches; _pdist_forward)."""

import torch

from ..case import Case, T

aten = torch.ops.aten
cdist, pdist = aten._cdist_forward.default, aten._pdist_forward.default
# Integer-valued inputs make p = 0 (count of differing coordinates) well defined.
INTEGRAL = (T((2, 3, 4), low=-2, high=2, dtype=torch.int32), T((2, 5, 4), low=-2, high=2,
                                                              dtype=torch.int32))

CASES = [
    Case(cdist, (T((2, 3, 4)), T((2, 5, 4), dynamic=(0, 1)), 2.0, None), name="p2"),
    Case(cdist, (T((3, 4)), T((5, 4)), 1.0, None), name="p1"),
    Case(cdist, (T((2, 3, 4)), T((2, 5, 4)), 3.0, None), name="p3"),
    Case(cdist, (T((1, 3, 4), dynamic=(1,)), T((2, 5, 4)), float("inf"), None),
         name="inf_broadcast"),
    Case(lambda a, b: cdist(a.float(), b.float(), 0.0, None), INTEGRAL, name="p0",
         check_op=cdist, dtypes=(torch.float32,)),
    Case(pdist, (T((5, 3)), 2.0), name="p2"),
    Case(pdist, (T((4, 3)), 1.0), name="p1"),
    Case(pdist, (T((6, 3), dynamic=(0, 1)), 3.0), name="p3_dyn_rows_cols", min_shape_delta=3),
    Case(pdist, (T((5, 4), dynamic=(0, 1)), float("inf")), name="inf_dyn"),
]
