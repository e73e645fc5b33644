"""Conformance cases: reductions (sum, mean, prod, amax/amin, max/min, any), arg-reductions,
variance and softmax/log-softmax."""

import torch

from ..case import ALL, FLOATS, Case, T

aten = torch.ops.aten
F32 = (torch.float32,)
B = (torch.bool,)
NAN = float("nan")

CASES = [
    # sum: int inputs accumulate in int64, bool counts; None / [] reduce everything.
    Case(aten.sum.dim_IntList, (T((3, 4)), [1]), dtypes=ALL + B),
    Case(aten.sum.dim_IntList, (T((2, 3, 4)), [0, -1], True), dtypes=F32, name="keepdim_neg"),
    Case(aten.sum.dim_IntList, (T((2, 3)), None), name="all", dtypes=ALL),
    Case(aten.sum.dim_IntList, (T((2, 3)), [1]), {"dtype": torch.float32}, name="dtype",
         dtypes=FLOATS + (torch.int32,)),
    Case(aten.sum.dim_IntList, (T((), dynamic=()), []), name="scalar"),
    # mean: resnet's global pool is mean over [-1, -2] with keepdim.
    Case(aten.mean.dim, (T((2, 3, 4, 5)), [-1, -2], True), name="global_pool"),
    Case(aten.mean.dim, (T((3, 4)), [0])),
    # The result is fp16 whatever the input dtype: fp16 tolerance.
    Case(aten.mean.dim, (T((3, 4)), [1]), {"dtype": torch.float16}, name="dtype",
         dtypes=(torch.float32,), tol={torch.float32: (1e-2, 1e-2)}),
    Case(aten.mean.default, (T((3, 4)),)),
    Case(aten.prod.default, (T((2, 3), low=0.5, high=1.5),), dtypes=ALL + B),
    Case(aten.prod.dim_int, (T((3, 4)), 1, True), dtypes=ALL),
    Case(aten.amax.default, (T((3, 4)), [1]), dtypes=ALL + B),
    Case(aten.amax.default, (T((2, 3, 4)), [], True), dtypes=F32, name="all"),
    Case(aten.amin.default, (T((3, 4)), [0], True), dtypes=ALL),
    Case(aten.max.default, (T((3, 4)),), dtypes=ALL),
    Case(aten.min.default, (T((3, 4)),), dtypes=ALL),
    Case(aten.any.default, (T((3, 4)),), dtypes=B + (torch.float32, torch.int32)),
    Case(aten.any.default, (T((2, 2), values=[[False, False], [False, False]]),),
         name="all_false", dtypes=B),
    Case(aten.any.dim, (T((2, 3, 4)), -1, True), dtypes=B + (torch.float32,)),
    Case(aten.any.dims, (T((2, 3, 4)), [0, 2]), dtypes=B + (torch.int64,)),
    Case(aten.any.dims, (T((2, 3)), []), name="no_dims", dtypes=(torch.float32,)),
    # arg-reductions: small int ranges make ties, where torch returns the first index.
    Case(aten.argmax.default, (T((3, 5)), 1), dtypes=ALL),
    Case(aten.argmax.default, (T((3, 5)),), name="flat", dtypes=ALL),
    Case(aten.argmax.default, (T((2, 3, 4)), 0, True), dtypes=F32, name="keepdim"),
    Case(aten.argmax.default, (T((2, 3), values=[[1.0, NAN, 3.0], [NAN, 2.0, NAN]]), 1),
         name="nan", dtypes=(torch.float32,)),
    Case(aten.argmin.default, (T((3, 5)), -1), dtypes=ALL),
    Case(aten.argmin.default, (T((3, 5)), None, True), name="flat_keepdim", dtypes=ALL),
    Case(aten.max.dim, (T((3, 5)), 1), dtypes=ALL),
    Case(aten.max.dim, (T((2, 3, 4)), -2, True), dtypes=F32, name="keepdim"),
    Case(aten.min.dim, (T((3, 5)), 0), dtypes=ALL),
    # variance: default correction 1, population variance, all dims, keepdim.
    Case(aten.var.correction, (T((3, 4)), [1])),
    Case(aten.var.correction, (T((3, 4)), [0]), {"correction": 0}, dtypes=F32, name="population"),
    Case(aten.var.correction, (T((2, 3, 4)), None), {"keepdim": True}, dtypes=F32, name="all"),
    Case(aten.var_mean.correction, (T((3, 4)), [1])),
    Case(aten.var_mean.correction, (T((2, 3, 4)), [0, 2]), {"keepdim": True},
         dtypes=F32, name="keepdim"),
    Case(aten._softmax.default, (T((2, 3, 4)), -1, False)),
    Case(aten._softmax.default, (T((3, 4), low=-50, high=50), 0, False), name="large"),
    Case(aten._softmax.default, (T((2, 3)), 1, True), name="half_to_float",
         dtypes=(torch.float16,), xfail={torch.float16: "eager reference: torch has no "
                                         "half_to_float softmax kernel on CPU"}),
    Case(aten._log_softmax.default, (T((2, 3, 4)), -1, False)),
    Case(aten._log_softmax.default, (T((3, 4), low=-50, high=50), 1, False), name="large"),
]
