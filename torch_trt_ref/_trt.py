"""The TensorRT import shim (D1): the full ``tensorrt`` package when installed, else
``tensorrt_rtx``, else a stand-in (``runtime/missing_trt.py``) with which the runtime loads
and runs saved programs on the reference executor and building raises a clear ImportError.
Every other module imports ``trt`` from here."""

from __future__ import annotations

import importlib

import torch

from .missing_trt import missing_tensorrt

_CANDIDATES = ("tensorrt", "tensorrt_rtx")


def _import_tensorrt():
    errors = []
    for name in _CANDIDATES:
        try:
            return importlib.import_module(name)
        except ImportError as err:  # keep looking, report all at the end
            errors.append(f"{name}: {err}")
    return missing_tensorrt(
        "compiling and the TensorRT executor need TensorRT: install either 'tensorrt' (full "
        "TensorRT, GPU machines) or 'tensorrt-rtx' (TensorRT for RTX, builds engines without "
        "a GPU); loading and running saved programs on the reference executor do not.\n"
        + "\n".join(errors))


trt = _import_tensorrt()
BACKEND: str = trt.__name__
HAS_TENSORRT: bool = BACKEND != "none"
IS_RTX: bool = BACKEND == "tensorrt_rtx"

_TORCH_TO_TRT = {
    torch.float32: trt.float32,
    torch.float16: trt.float16,
    torch.bfloat16: trt.bfloat16,
    torch.int32: trt.int32,
    torch.int64: trt.int64,
    torch.int8: trt.int8,
    torch.uint8: trt.uint8,
    torch.bool: trt.bool,
}
# TensorRT's low-precision types as the reference executor holds them (Note [Low-precision
# tensors], runtime/reference/layers/common.py). Only this direction: a torch tensor of
# float4_e2m1fn_x2 or int4 elsewhere means packed values, which TensorRT inputs never take.
_LOW_PRECISION_TO_TORCH = {
    "FP8": torch.float8_e4m3fn, "E8M0": torch.float8_e8m0fnu,
    "FP4": torch.float4_e2m1fn_x2, "INT4": torch.int4,
}
_TRT_TO_TORCH = {v: k for k, v in _TORCH_TO_TRT.items()} | {
    getattr(trt.DataType, name): dtype for name, dtype in _LOW_PRECISION_TO_TORCH.items()
    if hasattr(trt.DataType, name)}


def to_trt_dtype(dtype: torch.dtype):
    """The TensorRT DataType for a torch dtype, or a TypeError naming the supported ones."""
    try:
        return _TORCH_TO_TRT[dtype]
    except KeyError:
        supported = ", ".join(str(d) for d in _TORCH_TO_TRT)
        raise TypeError(f"TensorRT has no type for {dtype}; supported: {supported}") from None


def to_torch_dtype(dtype) -> torch.dtype:
    """The torch dtype holding TensorRT DataType ``dtype``, or a KeyError naming it."""
    try:
        return _TRT_TO_TORCH[dtype]
    except KeyError:
        raise KeyError(f"no torch dtype for TensorRT type {getattr(dtype, 'name', dtype)}") \
            from None


def is_trt_dtype_supported(dtype: torch.dtype) -> bool:
    return dtype in _TORCH_TO_TRT


class CollectingLogger(trt.ILogger):
    """A TensorRT logger that keeps error messages, so failures can say why."""

    def __init__(self):
        trt.ILogger.__init__(self)
        self.errors: list[str] = []

    def log(self, severity, msg):
        if severity in (trt.ILogger.Severity.ERROR, trt.ILogger.Severity.INTERNAL_ERROR):
            self.errors.append(msg)


def make_logger() -> CollectingLogger:
    return CollectingLogger()
