"""A user's own model for the CLI: ``path/to/file.py:factory``, a function in that file
returning ``(model, inputs)`` or ``(model, inputs, kwarg_inputs)``, loaded as a
``ZooEntry`` so ``torch-trt-ref compile`` and ``debug`` treat it like a zoo model."""

from __future__ import annotations

import importlib.util
import os
import sys

import torch

from torch_trt_ref.arguments import as_model

from .entry import ZooEntry

MODEL_HELP = ("a zoo model name (torch-trt-ref zoo list) or path/to/file.py:factory, a "
              "function there returning (model, inputs) or (model, inputs, kwarg_inputs)")


class ModelSpecError(ValueError):
    """A bad ``path/to/file.py:factory``: the CLI prints it as one line, exit code 2."""


def is_file_spec(spec: str) -> bool:
    """Does ``spec`` name a file (``path.py:factory``) rather than a zoo model?"""
    return ":" in spec or spec.endswith(".py")


def load(spec: str) -> ZooEntry:
    """Import the file, call the factory once and check what it returned; the entry's
    factory hands out that model. Every mistake is a ModelSpecError saying what is
    expected."""
    path, sep, name = spec.rpartition(":")

    def fail(what: str, cause: Exception | None = None):
        raise ModelSpecError(f"model {spec!r}: {what}") from cause

    if not sep or not path or not name.isidentifier():
        fail(f"expected {MODEL_HELP}")
    if not os.path.isfile(path):
        fail(f"no such file {path!r}")
    module_spec = importlib.util.spec_from_file_location(
        "torch_trt_ref_user_" + os.path.splitext(os.path.basename(path))[0], path)
    if module_spec is None:
        fail(f"{path!r} is not a Python file")
    module = importlib.util.module_from_spec(module_spec)
    try:
        module_spec.loader.exec_module(module)
    except Exception as err:  # the user's file: any error is theirs to see
        fail(f"importing {path} raised {type(err).__name__}: {err}", err)
    factory = getattr(module, name, None)
    if not callable(factory):
        found = sorted(k for k, v in vars(module).items()
                       if callable(v) and getattr(v, "__module__", None) == module.__name__)
        fail(f"{path} has no function {name!r}; functions there: {', '.join(found) or 'none'}")
    try:
        made = factory()
    except Exception as err:
        fail(f"{name}() raised {type(err).__name__}: {err}", err)
    if not isinstance(made, (tuple, list)) or len(made) not in (2, 3):
        fail(f"{name}() returned {type(made).__name__}; expected (model, inputs) or "
             "(model, inputs, kwarg_inputs)")
    model, inputs, kwargs = (*made, {}) if len(made) == 2 else made
    if isinstance(model, torch.export.ExportedProgram):
        fail(f"{name}() returned an ExportedProgram; return the module (ep.module() or the "
             "model it was exported from)")
    if not callable(model):
        fail(f"{name}() returned a {type(model).__name__} as the model; expected a "
             "torch.nn.Module (or a function of tensors)")
    model = as_model(model)
    inputs = (inputs,) if isinstance(inputs, torch.Tensor) else inputs
    if not isinstance(inputs, (tuple, list)) or not isinstance(kwargs, dict):
        fail(f"{name}() returned inputs of type {type(inputs).__name__} and kwarg_inputs of "
             f"type {type(kwargs).__name__}; expected a tuple of tensors and a dict")
    if model.training:
        print(f"note: {name}() returned a model in train mode; it is compiled and compared "
              "in eval mode", file=sys.stderr)
    return ZooEntry(spec, lambda: model, lambda: (tuple(inputs), dict(kwargs)),
                    description=f"{name}() from {path}")
