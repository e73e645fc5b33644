"""torch_trt_ref: a compact reference implementation of the Torch-TensorRT compiler.

Public API: ``compile``, ``Input``, ``CompilationSettings``, ``converter`` (register a
converter), ``register_decomposition``, ``get_graph_converter_support``, ``run_network``
(run a TensorRT network on the reference executor), ``save`` / ``load`` (a compiled program
in one file) and ``refit`` (new weights into a compiled module without rebuilding):
docs/deploy.md; ``quantize`` (INT8/FP8/NVFP4 post-training quantization):
docs/quantization.md; ``MutableModule`` (a compiled model that refits itself when its
model's weights change: LoRA adapters, checkpoints): docs/deploy.md."""

from ._trt import BACKEND as TRT_BACKEND  # noqa: F401
from .compiler import compile, executors_used  # noqa: F401
from .conversion.registry import CONVERTERS, converter  # noqa: F401
from .dynamo_backend import register as _register_backend
from .inputs import Input  # noqa: F401
from .lowering.decompositions import register_decomposition  # noqa: F401
from .mutable import MutableModule, load, save  # noqa: F401
from .partitioning import get_graph_converter_support  # noqa: F401
from .quantization import quantize  # noqa: F401
from .refit import RefitError, refit  # noqa: F401
from .runtime.network import run_network  # noqa: F401
from .serialize import SerializationError  # noqa: F401
from .settings import CompilationSettings  # noqa: F401

_register_backend()  # torch.compile(backend="torch_trt_ref"); the entry point does it lazily

__all__ = ["compile", "executors_used", "Input", "CompilationSettings", "converter",
           "register_decomposition", "get_graph_converter_support", "CONVERTERS",
           "run_network", "save", "load", "SerializationError", "refit", "RefitError",
           "quantize", "MutableModule"]
