"""Quantization (DESIGN D13): the ``tensorrt::`` quantizer ops (ours when ModelOpt is absent)
and post-training quantization of Linear/Conv layers: docs/quantization.md."""

from .ops import OWNER, QUANTIZE_OPS, dynamic_block_quantize_op, quantize_op  # noqa: F401
from .ptq import FORMAT_BITS, TensorQuantizer, quantize, quantizers  # noqa: F401
