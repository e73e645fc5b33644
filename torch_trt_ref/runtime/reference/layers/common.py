"""Small utilities shared by reference layer functions."""

from __future__ import annotations

import torch

from ..resolved import running as resolved_running

# Note [Low-precision tensors]: the executor holds every TensorRT tensor as a torch tensor
# of one dtype per TensorRT DataType, so that `_check` (executor.py) can compare each
# layer output's dtype with the one TensorRT inferred. Each element is one value; nothing is
# packed (TensorRT packs FP4 and INT4 two per byte in memory, a layout the executor never
# sees):
#   FP8  (E4M3)  torch.float8_e4m3fn    exactly TensorRT's type (max 448, NaN, no inf)
#   E8M0         torch.float8_e8m0fnu   exactly TensorRT's type (powers of two, NaN)
#   FP4  (E2M1)  torch.float4_e2m1fn_x2 ONE value per byte: its E2M1 code in the low
#                nibble, high nibble zero (torch's dtype means two values per byte; torch
#                has no arithmetic on it, so only data movement and our own
#                quantize_ops.widen/narrow ever touch its bytes)
#   INT4         torch.int4             as quantize_ops.Int4Tensor: torch has no kernel at
#                all for torch.int4 (not even copy), so the values live in an int8 tensor
#                wrapped by a tensor subclass whose dtype is torch.int4 and whose ops
#                (a transposing SHUFFLE, CONCATENATION, ...) run on the int8 values
# Layer functions read these with quantize_ops.widen (FP8, E8M0, FP4 -> float32; INT4 ->
# int8) and produce them with quantize_ops.narrow (TensorRT's rounding and saturation).
DTYPES_BY_NAME = {
    "FLOAT": torch.float32, "HALF": torch.float16, "BF16": torch.bfloat16,
    "INT32": torch.int32, "INT64": torch.int64, "INT8": torch.int8, "UINT8": torch.uint8,
    "BOOL": torch.bool, "FP8": torch.float8_e4m3fn, "E8M0": torch.float8_e8m0fnu,
    "FP4": torch.float4_e2m1fn_x2, "INT4": torch.int4,
}
# TensorRT types whose values only quantize_ops.narrow can produce.
LOW_PRECISION = ("FP8", "E8M0", "FP4", "INT4")


def axes_from_mask(mask: int, rank: int) -> list[int]:
    return [d for d in range(rank) if mask >> d & 1]


def trim(perm, rank: int) -> list[int]:
    """TensorRT Permutations are fixed-length; only the first ``rank`` entries matter."""
    return list(perm[:rank])


def capturing() -> bool:
    """Whether a CUDA graph is being captured on this thread's current stream, torch.compile
    is tracing the replay (Note [Compiled replay]), or a replay resolved for capture runs
    (Note [Shapes resolved before capture]): layer functions then skip checks that read
    tensor values on the host (a capture forbids them; under the trace each would break the
    graph). The uncaptured, checked first run of each input signature made them."""
    if torch.compiler.is_compiling() or resolved_running():
        return True
    return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()
