"""Small utilities shared by reference layer functions."""

from __future__ import annotations

import torch

DTYPES_BY_NAME = {
    "FLOAT": torch.float32, "HALF": torch.float16, "BF16": torch.bfloat16,
    "INT32": torch.int32, "INT64": torch.int64, "INT8": torch.int8, "UINT8": torch.uint8,
    "BOOL": torch.bool,
}


def axes_from_mask(mask: int, rank: int) -> list[int]:
    return [d for d in range(rank) if mask >> d & 1]


def trim(perm, rank: int) -> list[int]:
    """TensorRT Permutations are fixed-length; only the first ``rank`` entries matter."""
    return list(perm[:rank])
