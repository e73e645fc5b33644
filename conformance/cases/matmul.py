"""Conformance cases: mm, bmm, addmm (GPT-2 Conv1D), addmv, addbmm, with weights as
constants or inputs and beta/alpha scaling."""

import torch

from ..case import INTS, Case, T, W

aten = torch.ops.aten

CASES = [
    Case(aten.mm.default, (T((3, 4)), T((4, 5), dynamic=(1,)))),
    Case(aten.mm.default, (T((5, 4)), W((4, 3))), name="weight"),
    Case(aten.mm.default, (T((2, 3)), T((3, 2))), name="int", dtypes=INTS, dynamic=False,
         xfail={t: "TensorRT has no integer matrix multiply (validator rejects)" for t in INTS}),
    Case(aten.bmm.default, (T((2, 3, 4)), T((2, 4, 5)))),
    Case(aten.addmm.default, (W((6,)), T((3, 4)), W((4, 6))), name="linear"),
    Case(aten.addmm.default, (T((3, 1)), T((3, 4)), T((4, 5), dynamic=(1,))),
         {"beta": 0.5, "alpha": 2.0}, name="scaled"),
    Case(aten.addmm.default, (T((3, 5), values=[[float("nan")] * 5] * 3), T((3, 4)),
                              T((4, 5))), {"beta": 0.0}, name="beta0_ignores_nan", dynamic=False),
    Case(aten.addmv.default, (T((3,)), T((3, 4)), T((4,), dynamic=())),
         {"beta": 2.0, "alpha": 0.5}),
    Case(aten.addbmm.default, (T((3, 5), dynamic=()), T((2, 3, 4)), T((2, 4, 5))),
         {"alpha": 0.5}),
]
