"""Conformance cases: activations (relu, sigmoid, tanh, leaky_relu, elu, gelu, hardtanh)."""

import torch

from ..case import ALL, INTS, Case, T

aten = torch.ops.aten
# Integer inputs with a float32 result are compared with the float32 tolerance.
FLOAT_RESULT_TOL = {torch.int32: (1e-4, 1e-4), torch.int64: (1e-4, 1e-4)}
WIDE = T((2, 3, 4), low=-8, high=8)  # reaches the flat and the clipped regions

CASES = [
    Case(aten.relu.default, (T((2, 3, 4)),), dtypes=ALL),
    Case(aten.sigmoid.default, (WIDE,)),
    Case(aten.sigmoid.default, (T((2, 3)),), name="int", dtypes=INTS, tol=FLOAT_RESULT_TOL),
    Case(aten.tanh.default, (WIDE,)),
    Case(aten.tanh.default, (T((2, 3)),), name="int", dtypes=INTS, tol=FLOAT_RESULT_TOL),
    Case(aten.leaky_relu.default, (T((2, 3, 4)),)),
    Case(aten.leaky_relu.default, (T((2, 3)), 0.2), name="slope"),
    Case(aten.elu.default, (WIDE,)),
    Case(aten.elu.default, (T((2, 3)), 0.5), name="alpha"),
    Case(aten.elu.default, (T((2, 3)), 1.6732632423543772, 1.0507009873554805), name="selu"),
    Case(aten.elu.default, (WIDE, 2.0, 1.5, 0.5), name="input_scale"),
    Case(aten.gelu.default, (WIDE,)),
    Case(aten.gelu.default, (WIDE,), {"approximate": "tanh"}, name="tanh"),
    Case(aten.hardtanh.default, (WIDE,)),
    Case(aten.hardtanh.default, (WIDE, 0.0, 6.0), name="relu6"),
    Case(aten.hardtanh.default, (T((2, 3), low=-8, high=8), 0, 6), name="int", dtypes=INTS),
]
