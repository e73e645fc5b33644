"""Reference semantics of TensorRT's quantization layers (QUANTIZE, DEQUANTIZE,
DYNAMIC_QUANTIZE) and of its low-precision types (FP8, INT4, FP4, E8M0)."""

from __future__ import annotations
