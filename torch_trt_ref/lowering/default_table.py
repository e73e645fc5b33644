"""torch.export's default decomposition table and its composite (CIA) op set, collected with
the C++ dispatcher's registrations materialized once: torch materializes them again for
every op namespace, twice per compile (~0.2 s of CPU in a fresh process, issue 25).
``tests/test_lowering.py`` holds both to torch's own functions."""

from __future__ import annotations

import torch

_CIA: frozenset | None = None


def all_cia_ops() -> frozenset:
    """``torch._export.utils._collect_all_valid_cia_ops()``: every functional composite op
    torch.export can keep whole, in every namespace. Computed once per process (ops
    registered later, e.g. by a library imported after the first compile, are missed; the
    same holds for the table cache of ``decomposition_table``).

    torch tests every overload of every op made so far (~0.06 s of CPU); only two kinds of
    overload can be composite, so only they are tested: those with a C++ composite kernel
    (the dispatcher lists them) and those with a Python one, which ``py_impl`` registered on
    an overload object already made (``packet._dir``)."""
    from torch._export.utils import _is_preservable_cia_op

    global _CIA
    if _CIA is None:
        key = torch._C.DispatchKey.CompositeImplicitAutograd
        candidates = set()
        for name in torch._C._dispatch_get_registrations_for_dispatch_key(
                "CompositeImplicitAutograd"):
            namespace, _, op = name.partition("::")
            packet, _, overload = op.partition(".")
            candidates.add(getattr(getattr(getattr(torch.ops, namespace), packet),
                                   overload or "default"))
        for name in list(torch.ops._dir):
            namespace = getattr(torch.ops, name)
            if not isinstance(namespace, torch._ops._OpNamespace):
                continue
            for op in list(namespace):
                packet = getattr(namespace, op)
                for overload in list(getattr(packet, "_dir", ())):
                    overload = getattr(packet, overload)
                    if key in getattr(overload, "py_kernels", ()):
                        candidates.add(overload)
        _CIA = frozenset(op for op in candidates if _is_preservable_cia_op(op))
    return _CIA


def default_entry(op, core: dict):
    """``default_table().get(op)`` for one op, without materializing the table: ``core``
    is ``_core_aten_decompositions_post_autograd()``; a composite op that torch.export
    would not keep gets its composite decomposition."""
    from torch._export.utils import _get_decomp_for_cia, _is_aten_op, _is_preservable_cia_op
    from torch.export.decomp_utils import PRESERVED_ATEN_CIA_OPS

    if op in core:
        return core[op]
    if not is_composite(op) or not _is_preservable_cia_op(op):
        return None
    if _is_aten_op(op) and op in PRESERVED_ATEN_CIA_OPS:
        return None
    return _get_decomp_for_cia(op)


def is_composite(op) -> bool:
    """Has a CompositeImplicitAutograd kernel, in C++ or Python (``all_cia_ops``'s two
    kinds of candidate)."""
    if torch._C.DispatchKey.CompositeImplicitAutograd in getattr(op, "py_kernels", ()):
        return True
    try:
        return torch._C._dispatch_has_kernel_for_dispatch_key(op.name(),
                                                              "CompositeImplicitAutograd")
    except RuntimeError:  # an overload the dispatcher does not know (aten::stride)
        return False


def default_table() -> dict:
    """``dict(torch.export.default_decompositions())``: the core ATen decompositions plus the
    decomposition of every composite op torch.export would not keep (aten's except those it
    preserves, and every other namespace's)."""
    from torch._decomp import _core_aten_decompositions_post_autograd
    from torch._export.utils import _get_decomp_for_cia, _is_aten_op
    from torch.export.decomp_utils import PRESERVED_ATEN_CIA_OPS

    table = _core_aten_decompositions_post_autograd()
    for op in all_cia_ops():
        if op not in table and not (_is_aten_op(op) and op in PRESERVED_ATEN_CIA_OPS):
            table[op] = _get_decomp_for_cia(op)
    return table
