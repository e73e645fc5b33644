"""Conformance cases: batch norm (inference and batch statistics), layer norm and group
norm, with and without affine parameters, plus the statistics outputs."""

import torch
import torch.nn.functional as F

from ..case import Case, T, W

aten = torch.ops.aten
bn_eval = aten._native_batch_norm_legit_no_training.default
bn_stats = aten._native_batch_norm_legit.no_stats
layer_norm, group_norm = aten.native_layer_norm.default, aten.native_group_norm.default


def _first(fn):
    """Only output 0 (the normalized tensor)."""
    return lambda *a, **k: fn(*a, **k)[0]


def _var(shape):
    return W(shape, low=0.5, high=2.0)


CASES = [
    Case(_first(bn_eval), (T((2, 3, 4, 4)), W((3,)), W((3,)), W((3,)), _var((3,)), 0.1, 1e-5),
         name="4d", check_op=bn_eval),
    Case(_first(bn_eval), (T((4, 5)), None, None, W((5,)), _var((5,)), 0.1, 1e-3),
         name="2d_no_affine", check_op=bn_eval),
    Case(_first(bn_eval), (T((2, 3, 6)), T((3,), dynamic=()), W((3,)), W((3,)), _var((3,)),
                           0.1, 1e-5), name="weight_input", check_op=bn_eval),
    Case(_first(bn_stats), (T((2, 3, 4, 4)), W((3,)), W((3,)), True, 0.1, 1e-5),
         name="4d", check_op=bn_stats),
    Case(_first(bn_stats), (T((1, 4, 5)), None, None, True, 0.1, 1e-5), name="no_affine",
         check_op=bn_stats),
    Case(_first(layer_norm), (T((2, 3, 8)), [8], W((8,)), W((8,)), 1e-5), name="last_dim",
         check_op=layer_norm),
    Case(_first(layer_norm), (T((2, 3, 4, 5)), [4, 5], None, None, 1e-6), name="two_dims",
         check_op=layer_norm),
    Case(layer_norm, (T((3, 6)), [6], W((6,)), None, 1e-5), name="with_stats"),
    # F.group_norm passes N and HxW from the input's (symbolic) shape.
    Case(F.group_norm, (T((2, 6, 4, 4)), 3, W((6,)), W((6,)), 1e-5), name="4d",
         check_op=group_norm),
    Case(F.group_norm, (T((2, 4, 5)), 2), name="3d_no_affine", check_op=group_norm),
    Case(group_norm, (T((2, 4, 3, 3)), W((4,)), W((4,)), 2, 4, 9, 4, 1e-5), name="with_stats",
         dynamic=False),
]

# Dynamic batch and spatial dims (the channel dim is fixed by the weights).
BATCH_SPATIAL = (0, 2, 3)
CASES += [
    Case(_first(bn_eval), (T((2, 3, 5, 4), dynamic=BATCH_SPATIAL), W((3,)), W((3,)), W((3,)),
                           _var((3,)), 0.1, 1e-5), name="dyn_spatial", check_op=bn_eval),
    Case(_first(bn_stats), (T((2, 3, 5, 4), dynamic=BATCH_SPATIAL), W((3,)), W((3,)), True,
                            0.1, 1e-5), name="dyn_spatial", check_op=bn_stats),
    Case(F.batch_norm, (T((2, 3, 5, 4), dynamic=BATCH_SPATIAL), W((3,)), _var((3,)),
                        W((3,)), W((3,))), name="functional_dyn_spatial", check_op=bn_eval),
    Case(_first(layer_norm), (T((2, 3, 8), dynamic=(0, 1)), [8], W((8,)), W((8,)), 1e-5),
         name="dyn_leading", check_op=layer_norm),
    Case(F.group_norm, (T((2, 6, 5, 4), dynamic=BATCH_SPATIAL), 3, W((6,)), W((6,)), 1e-5),
         name="dyn_spatial", check_op=group_norm),
    Case(F.group_norm, (T((2, 4, 7), dynamic=(0, 2)), 2), name="dyn_3d_no_affine",
         check_op=group_norm),
    # N and HxW from the (symbolic) input shape, as F.group_norm passes them; all 3 outputs
    Case(lambda x, w, b: group_norm(x, w, b, x.shape[0], 4, x.shape[2] * x.shape[3], 2, 1e-5),
         (T((2, 4, 3, 5), dynamic=BATCH_SPATIAL), W((4,)), W((4,))),
         name="dyn_spatial_with_stats", check_op=group_norm),
]

# Instance norm lowers to batch statistics over (1, N * C, ...): the channel dim is dynamic
# when the batch is.
CASES += [
    Case(F.instance_norm, (T((2, 3, 5, 4), dynamic=BATCH_SPATIAL),), name="instance_dyn",
         check_op=bn_stats),
    Case(F.instance_norm, (T((3, 2, 7), dynamic=(0, 2)),), name="instance_1d_dyn",
         check_op=bn_stats),
]
