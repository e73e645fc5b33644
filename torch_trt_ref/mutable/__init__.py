"""Compiled modules that follow their model's weights: ``MutableModule`` (refit on change,
recompile on a change of shapes or structure), and ``save`` / ``load`` that handle it next
to compiled programs (docs/deploy.md "Weights that change") and compiled decoders
(``torch_trt_ref.llm``, docs/llm.md)."""

from __future__ import annotations

import os
from pathlib import Path

import torch

from ..llm.compiled import CompiledDecoder
from ..llm.files import is_decoder_file, load_decoder, save_decoder
from ..serialize import load as load_program
from ..serialize import save as save_program
from .files import is_mutable_file, load_mutable, save_mutable
from .module import MutableModule, RecompileWarning, Update

__all__ = ["MutableModule", "RecompileWarning", "Update", "save", "load"]


def save(module: torch.nn.Module, path: str | os.PathLike, plans: bool = True) -> Path:
    """``torch_trt_ref.save``: a compiled program (``serialize.save``), or a
    ``MutableModule`` with its model (``files.save_mutable``), or a compiled decoder
    (``torch_trt_ref.llm.compile``; ``llm/files.py``)."""
    if isinstance(module, MutableModule):
        return save_mutable(module, path)
    if isinstance(module, CompiledDecoder):
        return save_decoder(module, path, plans=plans)
    return save_program(module, path, plans=plans)


def load(path: str | os.PathLike) -> torch.nn.Module:
    """``torch_trt_ref.load``: what ``save`` wrote, a ``MutableModule`` or a compiled
    decoder included."""
    if is_decoder_file(path):
        return load_decoder(path)
    return load_mutable(path) if is_mutable_file(path) else load_program(path)


save.__doc__ = f"{save.__doc__}\n\n{save_program.__doc__}"
load.__doc__ = f"{load.__doc__}\n\n{load_program.__doc__}"
