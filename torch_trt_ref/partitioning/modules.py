"""Module fallback (seed 001): nodes inside a submodule named by ``torch_executed_modules``
run in PyTorch. torch.export records the submodule chain of each node in
``meta["nn_module_stack"]``; the TorchScript frontend and the torch.compile backend, whose
graphs export sees as one module, record the chain of the original model under
``meta["custom"]`` (``torchscript.py``, ``dynamo_backend.py``)."""

from __future__ import annotations

from torch.fx import Node

from ..capture import MODULE_STACK
from ..settings import CompilationSettings


def module_stack(node: Node) -> list[tuple[str, str]]:
    """(path, qualified type name) of every module enclosing ``node``, outermost first
    (the root module has path "")."""
    custom = node.meta.get("custom") or {}
    if MODULE_STACK in custom:
        return [tuple(entry) for entry in custom[MODULE_STACK]]
    stack = node.meta.get("nn_module_stack") or {}
    out = []
    for path, kind in stack.values():
        name = kind if isinstance(kind, str) else f"{kind.__module__}.{kind.__qualname__}"
        out.append((path, name))
    return out


def _named(path: str, kind: str, names: frozenset[str]) -> bool:
    return (bool(path) and path in names) or kind in names or kind.rsplit(".", 1)[-1] in names


def module_fallback_reason(node: Node, settings: CompilationSettings) -> str | None:
    """Why ``node`` must run in PyTorch under ``settings.torch_executed_modules``, or None.
    A listed name matches a submodule path ("layer1.0"), a qualified type name
    ("torchvision.models.resnet.BasicBlock") or a bare type name ("BasicBlock")."""
    names = settings.torch_executed_modules
    if not names:
        return None
    for path, kind in module_stack(node):
        if _named(path, kind, names):
            where = path or "<root>"
            return (f"inside torch_executed_modules module {where} "
                    f"({kind.rsplit('.', 1)[-1]})")
    return None
