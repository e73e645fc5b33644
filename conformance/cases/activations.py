"""Conformance cases: activations."""

import torch

from ..case import Case, T

aten = torch.ops.aten

CASES = [
    Case(aten.relu.default, (T((2, 3, 4)),)),
]
