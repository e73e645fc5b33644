"""Conformance cases: upsampling (nearest, nearest-exact, linear/bilinear/trilinear with
and without align_corners, bicubic) by output size and by scale factor."""

import torch

from ..case import Case, T

aten = torch.ops.aten

CASES = [
    Case(aten.upsample_nearest2d.vec, (T((1, 2, 4, 5)), None, [2.0, 3.0]), name="scale"),
    Case(aten.upsample_nearest2d.vec, (T((2, 2, 4, 5)), [7, 3], None), name="size"),
    Case(aten.upsample_nearest2d.vec, (T((1, 2, 5, 5)), None, [1.5, 1.5]),
         name="fractional"),
    Case(aten.upsample_nearest1d.vec, (T((2, 3, 5)), [9], None), name="size"),
    Case(aten.upsample_nearest3d.vec, (T((1, 2, 2, 3, 3)), None, [2.0, 1.0, 2.0]),
         name="scale"),
    Case(aten._upsample_nearest_exact2d.vec, (T((1, 2, 4, 5)), [7, 8], None), name="size"),
    Case(aten._upsample_nearest_exact1d.vec, (T((2, 3, 5)), None, [2.0]), name="scale"),
    Case(aten._upsample_nearest_exact3d.vec, (T((1, 2, 2, 3, 3)), [3, 5, 4], None),
         name="size"),
    Case(aten.upsample_bilinear2d.vec, (T((1, 2, 4, 5)), None, False, [2.0, 2.0]),
         name="scale"),
    Case(aten.upsample_bilinear2d.vec, (T((2, 2, 4, 5)), [7, 3], True, None),
         name="align_corners"),
    Case(aten.upsample_bilinear2d.vec, (T((1, 2, 6, 6)), [4, 1], False, None),
         name="downsample"),
    Case(aten.upsample_linear1d.vec, (T((2, 3, 5)), [8], False, None), name="size"),
    Case(aten.upsample_trilinear3d.vec, (T((1, 2, 2, 3, 3)), None, True, [2.0, 2.0, 2.0]),
         name="align_corners"),
    Case(aten.upsample_bicubic2d.vec, (T((1, 2, 4, 5)), [8, 7], False, None), name="size"),
    Case(aten.upsample_bicubic2d.vec, (T((1, 2, 4, 4)), None, True, [2.0, 2.0]),
         name="align_corners"),
    Case(aten.upsample_nearest2d.default, (T((2, 2, 3, 4)), [6, 5]), name="size"),
    Case(aten.upsample_nearest2d.default, (T((1, 2, 3, 4)), [6, 8], 2.0, 2.0), name="scales"),
    Case(aten.upsample_nearest2d.default, (T((1, 2, 3, 4)), [5, 8], 1.5, 2.0),
         name="inexact_scale", dynamic=False),
    Case(aten.upsample_trilinear3d.default, (T((1, 2, 2, 3, 3)), [3, 5, 4], False),
         name="size"),
    Case(aten.upsample_trilinear3d.default, (T((1, 2, 2, 3, 3)), [4, 6, 6], True),
         name="align_corners"),
]

GRID = T((2, 5, 6, 2), low=-1.2, high=1.2)  # some samples fall outside [-1, 1]
grid_sampler = aten.grid_sampler_2d.default
CASES += [
    Case(grid_sampler, (T((2, 3, 4, 5)), GRID, 0, 0, False), name="bilinear_zeros"),
    Case(grid_sampler, (T((2, 3, 4, 5)), GRID, 0, 1, True), name="bilinear_border"),
    Case(grid_sampler, (T((2, 3, 4, 5)), GRID, 0, 2, False), name="bilinear_reflection"),
    # Nearest picks and cubic weights are ill-conditioned in the grid coordinate: a
    # half-precision grid moves samples across pixels, and eager half kernels round their
    # intermediates differently, so these modes are compared in fp32 only.
    Case(grid_sampler, (T((2, 3, 4, 5)), GRID, 1, 0, True), name="nearest",
         dtypes=(torch.float32,)),
    Case(grid_sampler, (T((2, 3, 4, 5)), GRID, 2, 1, False), name="bicubic",
         dtypes=(torch.float32,)),
    Case(aten.grid_sampler_3d.default, (T((2, 2, 3, 4, 5)), T((2, 2, 3, 4, 3), low=-1.2,
                                                             high=1.2), 0, 0, False),
         name="trilinear_zeros"),
    Case(aten.grid_sampler_3d.default, (T((1, 2, 3, 4, 5)), T((1, 2, 3, 4, 3), low=-1.2,
                                                             high=1.2), 1, 1, True),
         name="nearest_border", dtypes=(torch.float32,)),
]

# Scale factors whose output size floor(in * scale) is fractional, on static and dynamic
# (batch and spatial) dims: torch maps coordinates with 1/scale (Note [Resize scales]).
SPATIAL = (0, 2, 3)
CASES += [
    Case(aten.upsample_nearest2d.vec, (T((2, 3, 7, 6), dynamic=SPATIAL), None, [1.5, 0.7]),
         name="fractional_dyn"),
    Case(aten.upsample_nearest2d.vec, (T((2, 3, 5, 6), dynamic=SPATIAL), None, [1.1, 2.1]),
         name="near_identity_and_double", dynamic=False),
    Case(aten.upsample_nearest1d.vec, (T((2, 3, 7), dynamic=(0, 2)), None, [2.5]),
         name="fractional_dyn"),
    Case(aten.upsample_nearest3d.vec, (T((1, 2, 3, 5, 4), dynamic=(2, 3, 4)), None,
                                       [1.5, 1.25, 0.75]), name="fractional_dyn"),
    Case(aten._upsample_nearest_exact2d.vec, (T((2, 3, 7, 6), dynamic=SPATIAL), None,
                                              [1.5, 0.6]), name="fractional_dyn"),
    Case(aten.upsample_bilinear2d.vec, (T((2, 3, 7, 6), dynamic=SPATIAL), None, False,
                                        [1.5, 0.75]), name="fractional_dyn"),
    Case(aten.upsample_linear1d.vec, (T((2, 3, 7)), None, False, [1.7]),
         name="fractional_static", dynamic=False),
    # 90 * 0.7 is 62.99999999999999 in double: ATen's output size is 62, not 63
    Case(aten.upsample_nearest1d.vec, (T((1, 2, 90), dynamic=(2,)), None, [0.7]),
         name="double_rounding_dyn"),
    Case(aten.upsample_trilinear3d.vec, (T((1, 2, 3, 5, 4), dynamic=(2, 3, 4)), None, False,
                                         [1.5, 1.25, 2.5]), name="fractional_dyn"),
    Case(aten.upsample_bilinear2d.vec, (T((2, 3, 7, 6), dynamic=SPATIAL), None, True,
                                        [1.5, 0.75]), name="fractional_align_corners_dyn"),
    Case(aten.upsample_bilinear2d.vec, (T((2, 3, 4, 6), dynamic=SPATIAL), None, False,
                                        [2.0, 3.0]), name="integer_scale_dyn"),
    Case(aten.upsample_bicubic2d.vec, (T((1, 2, 5, 5)), None, False, [1.5, 1.5]),
         name="fractional"),
    Case(aten.upsample_bicubic2d.vec, (T((2, 3, 7, 6), dynamic=SPATIAL), None, False,
                                       [1.3, 0.6]), name="fractional_dyn"),
]
