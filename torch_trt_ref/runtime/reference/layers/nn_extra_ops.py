"""Reference semantics of further TensorRT neural-network layers: grid sample."""

from __future__ import annotations

import torch.nn.functional as F

from ..registry import reference_layer

_MODES = {"LINEAR": "bilinear", "NEAREST": "nearest", "CUBIC": "bicubic"}
_PADDING = {"FILL": "zeros", "CLAMP": "border", "REFLECT": "reflection"}


@reference_layer("GRID_SAMPLE", "IGridSampleLayer",
                 attrs=("interpolation_mode", "align_corners", "sample_mode"))
def grid_sample(inputs, interpolation_mode, align_corners, sample_mode):
    """ONNX GridSample on (N, C, *spatial) with grid (N, *out, nd) of normalized (x, y[, z]):
    FILL samples zeros outside, CLAMP the border, REFLECT mirrors; NEAREST rounds half to
    even and CUBIC uses A = -0.75, as torch's grid_sample does."""
    x, grid = inputs
    if sample_mode not in _PADDING:
        raise NotImplementedError(f"grid sample mode {sample_mode}")
    out = F.grid_sample(x.float(), grid.float(), mode=_MODES[interpolation_mode],
                        padding_mode=_PADDING[sample_mode], align_corners=bool(align_corners))
    return (out.to(x.dtype),)
