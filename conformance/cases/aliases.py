"""Conformance cases: composite ops converted as the op they name (grid_sampler ->
grid_sampler_2d/3d, clip -> clamp), kept whole by disabling their decomposition."""

import torch

from ..case import ALL, FLOATS, Case, T

aten = torch.ops.aten
GRID = T((2, 3, 3, 2), low=-1.2, high=1.2)


def keep(name: str) -> dict:
    return {"disabled_decompositions": {name}}


CASES = [
    Case(aten.grid_sampler.default, (T((2, 3, 4, 5)), GRID, 0, 0, False),
         settings=keep("aten.grid_sampler"), dtypes=FLOATS),
    Case(aten.grid_sampler.default, (T((2, 3, 4, 5)), GRID, 1, 1, True),
         settings=keep("aten.grid_sampler"), name="nearest_border", dtypes=FLOATS),
    Case(aten.clip.default, (T((2, 3)), -1, 1), settings=keep("aten.clip"), dtypes=ALL),
    Case(aten.clip.Tensor, (T((2, 3)), T((2, 3), low=-2, high=0), T((2, 3), low=0, high=2)),
         settings=keep("aten.clip"), dtypes=ALL),
]
