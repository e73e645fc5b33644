"""Ops that libraries register with torch.library (transformers' ``grouped_mm_fallback``, a
user's own ``mylib::op``) in a compiled module: which Python module registers each, so that
loading a saved program imports it first, or names the op and module it lacks."""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import sys

import torch
from torch._library.custom_ops import OPDEFS

# Note [Library ops in a saved program]: a graph node calling ``torch.ops.mylib.op`` pickles
# the op by name, and in a fresh process the name resolves only once the module that
# registers it has run (an AttributeError of ``_OpNamespace`` otherwise). ``save`` records,
# per library op, the module that registered it (torch.library.custom_op's function, else
# the file torch's dispatcher says registered the schema); unpickling imports that module
# before anything that needs the op. Importing a module the file names runs no more code
# than unpickling the file already does; ``__main__`` (the user's script) and modules not
# importable here are never imported: the error names the op and the module instead.

# torch's own namespaces: always registered once torch is imported (not looked up per node)
_TORCH_NAMESPACES = frozenset({"aten", "prims", "prim", "quantized", "_quantized",
                               "quantized_decomposed", "higher_order", "_c10d_functional"})
_REGISTERED_AT = re.compile(r"^debug: registered at (.+\.py):\d+", re.MULTILINE)


def is_library_op(target) -> bool:
    """An OpOverload that a module outside torch registers (its defining module is known and
    is not torch's), so a fresh process may lack it."""
    module = defining_module(target)
    return module is not None and module.split(".")[0] != "torch"


def defining_module(op) -> str | None:
    """The Python module that registered ``op`` (an OpOverload), if torch knows it."""
    if not isinstance(op, torch._ops.OpOverload) or op.namespace in _TORCH_NAMESPACES:
        return None
    qualname = op._schema.name
    opdef = OPDEFS.get(qualname)
    init = getattr(opdef, "_init_fn", None)
    if init is not None and getattr(init, "__module__", None):
        return init.__module__
    match = _REGISTERED_AT.search(torch._C._dispatch_dump(qualname) or "")
    return _module_of_file(match.group(1)) if match else None


def _module_of_file(path: str) -> str | None:
    path = os.path.realpath(path)
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if file and os.path.realpath(file) == path:
            return name
    return None


def library_ops(module: torch.nn.Module) -> dict[str, str]:
    """op qualname ("mylib::op") -> registering module, for every library op a graph of
    ``module`` (or of its submodules) calls."""
    found = {}
    for sub in module.modules():
        graph = getattr(sub, "graph", None)
        if not isinstance(graph, torch.fx.Graph):
            continue
        for node in graph.nodes:
            if node.op == "call_function" and is_library_op(node.target):
                found[node.target._schema.name] = defining_module(node.target)
    return found


def _registered(qualname: str) -> bool:
    namespace, name = qualname.split("::", 1)
    try:
        getattr(getattr(torch.ops, namespace), name.split(".")[0])
    except (AttributeError, RuntimeError):
        return False
    return True


def require(ops: dict[str, str | None], error=RuntimeError) -> dict[str, str | None]:
    """Make every op of ``ops`` (qualname -> registering module) callable: import the module
    of each op not registered yet (Note [Library ops in a saved program]); ``error`` naming
    the op and its module when that is not possible. Returns ``ops``."""
    for qualname, module in ops.items():
        if _registered(qualname):
            continue
        why = _import(module)
        if why is None and _registered(qualname):
            continue
        where = (f"registered by the module {module!r}" if module else
                 "registered by a module the program does not name")
        raise error(f"the program calls the op {qualname}, {where}, which is not registered "
                    f"in this process: {why or f'importing {module!r} did not register it'}. "
                    f"Accepted: make {module or 'that module'} importable here (install the "
                    f"library, or put it on sys.path), or import it before loading")
    return ops


def _import(module: str | None) -> str | None:
    """None once ``module`` is imported, else why it was not."""
    if not module:
        return "the module that registers it is unknown"
    if module == "__main__":
        return "it was registered by a script run as __main__, which load does not import"
    try:
        if importlib.util.find_spec(module) is None:
            return f"no module named {module!r} here"
        importlib.import_module(module)
    except Exception as err:  # noqa: BLE001  (any failure to import is the reason given)
        return f"importing {module!r} failed ({type(err).__name__}: {err})"
    return None
