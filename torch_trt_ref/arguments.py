"""``compile``'s arguments checked before anything is traced: the model (a module, an
ExportedProgram or a function), the example inputs and train mode. Each mistake is a
TypeError naming what was wrong and what is accepted."""

from __future__ import annotations

import inspect
from typing import Any, Optional

import torch
from torch.export import ExportedProgram

from .inputs import Input

_INPUTS_ACCEPTED = ("a tuple or list of tensors or torch_trt_ref.Input specs, one per "
                    "positional argument of forward (a single tensor or Input is taken as a "
                    "1-tuple; () for a forward without positional arguments)")


def positional_inputs(inputs: Any) -> list[Any]:
    """``compile``'s ``inputs`` as a list: a tuple or list as given, a bare tensor or Input
    as a 1-tuple (as Torch-TensorRT does). None or anything else is a TypeError saying
    what is accepted."""
    if isinstance(inputs, (torch.Tensor, Input)):
        return [inputs]
    if isinstance(inputs, (tuple, list)):
        return list(inputs)
    got = "None" if inputs is None else f"a {type(inputs).__name__}"
    hint = " (keyword inputs go in kwarg_inputs=)" if isinstance(inputs, dict) else ""
    raise TypeError(f"inputs: got {got}; compile needs example inputs: "
                    f"{_INPUTS_ACCEPTED}{hint}")


def keyword_inputs(kwarg_inputs: Any) -> dict[str, Any]:
    """``compile``'s ``kwarg_inputs``: a dict of name -> tensor or Input (None: no kwargs)."""
    if kwarg_inputs is None:
        return {}
    if not isinstance(kwarg_inputs, dict):
        raise TypeError(f"kwarg_inputs: got a {type(kwarg_inputs).__name__}; expected a dict "
                        "of argument name -> tensor or torch_trt_ref.Input")
    return dict(kwarg_inputs)


class FunctionModule(torch.nn.Module):
    """A plain function as a module without weights, so torch.export can capture it; its
    ``forward`` is the function itself (same signature, same argument names)."""

    def __init__(self, fn):
        super().__init__()
        self.forward = fn
        self.function_name = getattr(fn, "__qualname__", repr(fn))
        self.train(False)  # a function has no train mode

    def extra_repr(self) -> str:
        return self.function_name


def as_model(model: Any) -> torch.nn.Module | ExportedProgram:
    """``compile``'s model: an nn.Module (TorchScript modules included), an
    ExportedProgram or a TorchScript function as given (``torchscript.py`` converts the
    TorchScript ones), a plain Python function or other callable wrapped in a
    ``FunctionModule``. A non-callable is a TypeError saying what is accepted."""
    if isinstance(model, (torch.nn.Module, ExportedProgram, torch.jit.ScriptFunction)):
        return model
    accepted = ("Accepted: a torch.nn.Module (scripted or traced ones too), a "
                "torch.export.ExportedProgram, a TorchScript function, or a Python "
                "function of tensors (wrapped as a module without weights)")
    if not callable(model):
        raise TypeError(f"model: got a {type(model).__name__}, which cannot be called. "
                        f"{accepted}")
    return FunctionModule(model)


def train_mode_warning(model: Any) -> str | None:
    """The warning for a model (or some of its submodules) in train mode, else None.
    Capture exports in eval mode and restores every flag afterwards (``eval_mode``), so
    the warning says what is compiled and that the model is left as it was. GraphModules
    are left out: the graph of an exported program is fixed already."""
    if not isinstance(model, torch.nn.Module):
        return None
    names = [name for name, m in model.named_modules()
             if m.training and not isinstance(m, torch.fx.GraphModule)]
    if not names:
        return None
    if names[0] == "":
        which = "the model is"
    else:
        shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
        which = f"submodule {shown} is" if len(names) == 1 else f"submodules {shown} are"
    return (f"{which} in train mode: compiled with eval semantics (dropout off, batch norm "
            "on running statistics); the model itself stays in train mode. Call "
            "model.eval() before compile to silence this.")


def forward_signature(model) -> Optional[inspect.Signature]:
    """``model.forward``'s signature; None for a non-module or a forward without one (a
    builtin or scripted forward: capture decides)."""
    if not isinstance(model, torch.nn.Module):
        return None
    try:
        return inspect.signature(model.forward)
    except (TypeError, ValueError):
        return None


def input_names(model, count: int) -> list[str]:
    """Names of the first ``count`` positional inputs: ``forward``'s parameter names where
    it has them, else "input i"."""
    signature = forward_signature(model)
    params = list(signature.parameters) if signature is not None else []
    return [params[i] if i < len(params) else f"input {i}" for i in range(count)]


def check_signature(model, inputs: list, kwarg_inputs: dict) -> None:
    """The example inputs must bind to ``model.forward``; else a TypeError naming the
    signature (rather than torch.export's error from deep inside tracing)."""
    signature = forward_signature(model)
    if signature is None:
        return
    try:
        signature.bind(*inputs, **kwarg_inputs)
    except TypeError as err:
        raise TypeError(f"the example inputs do not fit {type(model).__name__}.forward"
                        f"{signature}: {err}. Give one example per argument: inputs=(...) "
                        "positionally, kwarg_inputs={...} by name") from None
