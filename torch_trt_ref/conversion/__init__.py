"""Conversion: the converter registry, the conversion context, shared building blocks and
the FX interpreter that turns a TensorRT segment into a network."""

from .plugin import PluginUnavailable, plugin  # noqa: F401
from .registry import CONVERTERS, ConverterRegistry, ConverterSupport, converter  # noqa: F401
