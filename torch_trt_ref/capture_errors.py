"""Errors torch.export raises for what a model does, said in terms of the model line and
what would be accepted: a Python value read from tensor data (GuardOnDataDependentSymNode),
a view grown by ``resize_`` (functionalization)."""

from __future__ import annotations

import os
import re
import traceback

import torch

_EXPR = re.compile(r"data-dependent expression (.+?) \(unhinted")


def _model_frame(err: Exception) -> str:
    """" at file:line: code" of the innermost frame of ``err``'s traceback outside torch and
    this package (the model line that raised), or ""."""
    skip = (os.path.dirname(torch.__file__), os.path.dirname(__file__))
    frames = [f for f in traceback.extract_tb(err.__traceback__)
              if not f.filename.startswith(skip)]
    if not frames:
        return ""
    frame = frames[-1]
    return f" at {frame.filename}:{frame.lineno}" + (f": {frame.line.strip()}"
                                                     if frame.line else "")


def data_dependent_message(err: Exception) -> str:
    """A GuardOnDataDependentSymNode from torch.export as: which model line read which
    tensor value in Python, and what export accepts instead."""
    expr = _EXPR.search(str(err))
    where = _model_frame(err)
    hint = (" torch.sym_not on a tensor is Python's `not` of its value: use "
            "torch.logical_not(t)." if "sym_not" in where else "")
    return (f"the model reads a tensor's value in Python"
            f"{f' ({expr.group(1)})' if expr else ''}{where}. torch.export traces shapes, "
            f"not values, so a Python bool, int or branch on tensor data cannot be captured "
            f"(GuardOnDataDependentSymNode).{hint} Accepted: tensor ops in its place "
            f"(torch.logical_not, torch.where), torch.cond for a branch, or "
            f"torch._check(...) stating what export may assume")


RESIZED_VIEW = "Attempted to resize a view tensor to a larger size"
_NODE = re.compile(r"While executing (%\S+ : .*)")


def resized_view_message(err: Exception) -> str:
    """Functionalization's refusal of ``resize_`` growing a view, as what to do instead."""
    node = _NODE.search(str(err))
    return (f"aten.resize_ grows a view of another tensor"
            f"{f' ({node.group(1).strip()})' if node else ''}: a write through a view "
            f"needs torch's functionalization, which cannot grow a view's storage. Accepted: "
            f"resize a copy of the view (v = v.clone(); v.resize_(...)) or a fresh tensor, or "
            f"resize to no more elements than the view has")
