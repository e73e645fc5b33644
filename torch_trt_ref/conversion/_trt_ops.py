"""Short aliases for TensorRT enums used by converters."""

from .._trt import trt

EW = trt.ElementWiseOperation
UN = trt.UnaryOperation
ACT = trt.ActivationType
RED = trt.ReduceOperation
