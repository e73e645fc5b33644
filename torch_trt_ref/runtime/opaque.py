"""Which torch can carry an engine through ``torch.export``: the ``EngineHandle`` is a
symbolic opaque object (``torch._library.opaque_object.register_custom_class``, with
``torch._custom_class_base.CustomClassBase``), which torch 2.14 has and 2.11 to 2.13 do not.

Without them the runtime still loads and runs compiled programs: ``EngineModule`` calls its
handle directly instead of through the ``torch_trt_ref::execute_engine`` op (runtime/
module.py), and only what needs the op (``torch.export`` of a compiled module, a ``.pt2``
program, ``torch.compile`` over engines) raises ``OpaqueHandlesUnavailable``."""

from __future__ import annotations

import torch

try:
    from torch._custom_class_base import CustomClassBase
    from torch._library.opaque_object import MemberType, register_custom_class
except ImportError as err:  # torch < 2.14
    HAS_OPAQUE_HANDLES = False
    _MISSING = f"{type(err).__name__}: {err}"

    class CustomClassBase:  # type: ignore[no-redef]
        """Stands in for torch's base class where torch has none."""
else:
    HAS_OPAQUE_HANDLES = True
    _MISSING = ""

# The oldest torch each part of the package runs on (pyproject.toml declares them).
RUNTIME_TORCH = "2.11"
EXPORT_TORCH = "2.14"


class OpaqueHandlesUnavailable(RuntimeError):
    """This torch cannot pass an engine to a custom op (no opaque objects)."""


def require_opaque_handles(what: str) -> None:
    """Raise a clear error for ``what`` (e.g. "compiling") on a torch without them."""
    if not HAS_OPAQUE_HANDLES:
        raise OpaqueHandlesUnavailable(
            f"{what} needs torch >= {EXPORT_TORCH} (engines are passed to the "
            f"torch_trt_ref::execute_engine op as opaque objects; torch {torch.__version__} "
            f"has none: {_MISSING}). Loading and running saved programs works on torch >= "
            f"{RUNTIME_TORCH}.")


def register_handle_class(cls: type) -> None:
    register_custom_class(cls, typ="symbolic",
                          members={"rules": MemberType.USE_REAL, "name": MemberType.USE_REAL})
