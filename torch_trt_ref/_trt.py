"""The TensorRT import shim (D1): the full ``tensorrt`` package when installed, else
``tensorrt_rtx``, else a stand-in (``runtime/missing_trt.py``) with which the runtime loads
and runs saved programs on the reference executor and building raises a clear ImportError.
Every other module imports ``trt`` from here.

Note [TensorRT for RTX through a folder of links]: the ONNX parser of tensorrt-rtx opens
``libtensorrt_rtx.so`` by that unversioned name when it adds a plugin layer, and the wheel
ships only ``libtensorrt_rtx.so.1``; without the name the process aborts
(conversion/plugin.py, Note [Plugin layers in TensorRT for RTX]). Both of the wheel's
libraries search their own folder (RPATH ``$ORIGIN``), and glibc takes ``$ORIGIN`` from the
path a library was opened by, not from the file a link points to. So before tensorrt_rtx is
imported, the shim opens the wheel's libraries through a folder of links it owns
(``$XDG_CACHE_HOME``, else ~/.cache, ``/torch_trt_ref/trt_rtx_links/<wheel>``, else the same
under the temporary folder: the two ``.so.1`` names and the unversioned one, all pointing
into the wheel); the wheel's own loader
then finds the same files already open (glibc matches an opened file by device and inode),
and the parser's ``dlopen`` finds the unversioned name beside itself. Nothing in the wheel or
the environment is changed. Where the folder cannot be made, or tensorrt_rtx was imported
before this module, ``RTX_LINKS`` says why and plugin layers need ``LD_LIBRARY_PATH``."""

from __future__ import annotations

import ctypes
import hashlib
import importlib
import importlib.util
import os
import sys
import tempfile
from pathlib import Path

import torch

from .missing_trt import missing_tensorrt

_CANDIDATES = ("tensorrt", "tensorrt_rtx")


_RTX_LIBRARIES = ("libtensorrt_rtx.so.1", "libtensorrt_onnxparser_rtx.so.1")
RTX_UNVERSIONED = "libtensorrt_rtx.so"


def _open_rtx_through_links() -> Path | str:
    """Open tensorrt-rtx's libraries through a folder of links (Note [TensorRT for RTX
    through a folder of links]): the folder, or why not."""
    if "tensorrt_rtx" in sys.modules or "tensorrt_rtx_libs" in sys.modules:
        return ("tensorrt_rtx was imported before torch_trt_ref: its libraries were opened "
                "from the wheel's folder")
    spec = importlib.util.find_spec("tensorrt_rtx_libs")
    if spec is None or spec.origin is None:
        return "the tensorrt_rtx_libs wheel is not installed"
    wheel = Path(spec.origin).resolve().parent
    if not all((wheel / n).exists() for n in _RTX_LIBRARIES):
        return f"{wheel} does not hold {' and '.join(_RTX_LIBRARIES)}"
    key = hashlib.sha1(str(wheel).encode()).hexdigest()[:12]
    links = {n: wheel / n for n in _RTX_LIBRARIES} | {RTX_UNVERSIONED: wheel / _RTX_LIBRARIES[0]}
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    spare = Path(tempfile.gettempdir()) / f"torch_trt_ref-{os.getuid()}"
    errors = []
    for root in (cache / "torch_trt_ref", spare):
        folder = root / "trt_rtx_links" / key
        try:
            _make_links(folder, links)
            for name in _RTX_LIBRARIES:  # the parser links against the runtime: runtime first
                ctypes.CDLL(str(folder / name))
        except OSError as err:
            errors.append(f"{folder}: {err}")
            continue
        return folder
    return "could not open the wheel's libraries through a folder of links: " + "; ".join(errors)


def _make_links(folder: Path, links: dict[str, Path]) -> None:
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    if folder.stat().st_uid != os.getuid():  # a shared temporary folder someone else made
        raise PermissionError(f"{folder} belongs to another user")
    for name, target in links.items():
        link = folder / name
        if not (link.is_symlink() and link.resolve() == target):
            temporary = folder / f".{name}.{os.getpid()}"
            temporary.unlink(missing_ok=True)
            temporary.symlink_to(target)
            os.replace(temporary, link)  # atomic: another process may be making it too


def _import_tensorrt():
    global RTX_LINKS
    errors = []
    for name in _CANDIDATES:
        if name == "tensorrt_rtx" and importlib.util.find_spec(name) is not None:
            RTX_LINKS = _open_rtx_through_links()
        try:
            return importlib.import_module(name)
        except ImportError as err:  # keep looking, report all at the end
            errors.append(f"{name}: {err}")
    return missing_tensorrt(
        "compiling and the TensorRT executor need TensorRT: install either 'tensorrt' (full "
        "TensorRT, GPU machines) or 'tensorrt-rtx' (TensorRT for RTX, builds engines without "
        "a GPU); loading and running saved programs on the reference executor do not.\n"
        + "\n".join(errors))


# The folder of links tensorrt-rtx's libraries were opened through, or why they were not
# (Note [TensorRT for RTX through a folder of links]); None when tensorrt_rtx is not used.
RTX_LINKS: Path | str | None = None
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
