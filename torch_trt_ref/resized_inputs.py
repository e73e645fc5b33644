"""``resize_`` of a model input (Note [Resizing an input]): captured as the out-of-place
``resize`` where torch.export can capture it, a clear error where it cannot."""

from __future__ import annotations

import warnings
from typing import Any

import torch
from torch.export import ExportedProgram
from torch.utils._python_dispatch import TorchDispatchMode

aten = torch.ops.aten
# in-place resize -> its out-of-place form (the ops functionalization produces)
RESIZES = {aten.resize_.default: aten.resize.default,
           aten.resize_as_.default: aten.resize_as.default}

# Note [Resizing an input]: ``x.resize_(size)`` on a model input changes the caller's tensor
# metadata, which torch.export does not record: a resize to no higher rank is captured as
# a call on the input with no mutation in the graph signature (and the full lowering route
# then fails: "len(mutations) (0) != num_mutated_inp_runtime_indices (1)"), and one that
# raises the rank fails inside export (an IndexError while it produces the input guards).
# The first is captured as what export recorded: the out-of-place ``resize`` (later readers
# of the input read its result), the compiled module returns the resized values and the
# caller's tensor keeps its shape (a warning says so). The second is a ValueError naming the
# input, the op and the shapes (``resized_input_error``).


def unwrite_resized_inputs(ep: ExportedProgram) -> ExportedProgram:
    """``ep`` with each in-place resize of a user input whose mutation the signature does not
    record made out-of-place (Note [Resizing an input]); a warning names those inputs."""
    signature = ep.graph_signature
    inputs = set(signature.user_inputs) - set(signature.user_inputs_to_mutate.values())
    graph = ep.graph
    order = {n: i for i, n in enumerate(graph.nodes)}
    resized = []
    for node in list(graph.nodes):
        x = node.args[0] if node.op == "call_function" and node.target in RESIZES else None
        if not isinstance(x, torch.fx.Node) or x.op != "placeholder" or x.name not in inputs:
            continue
        with graph.inserting_before(node):
            new = graph.call_function(RESIZES[node.target], node.args, node.kwargs)
        new.meta = dict(node.meta)
        order[new] = order[node]
        node.replace_all_uses_with(new)
        for user in list(x.users):
            if user is not new and order[user] > order[node]:
                user.replace_input_with(x, new)
        graph.erase_node(node)
        resized.append(x.name)
    if resized:
        ep.graph_module.recompile()
        warnings.warn(f"the model resizes its input(s) {sorted(set(resized))} in place "
                      "(aten.resize_), which torch.export does not record: the compiled module "
                      "returns the resized values and leaves the caller's tensor as it was",
                      stacklevel=4)
    return ep


class _ResizeRecorder(TorchDispatchMode):
    """Records in-place resizes of the given tensors: (name, shape before, size)."""

    def __init__(self, tensors: dict[int, str]):
        super().__init__()
        self.tensors, self.found = tensors, []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func in RESIZES and id(args[0]) in self.tensors:
            size = args[1].shape if isinstance(args[1], torch.Tensor) else args[1]
            self.found.append((self.tensors[id(args[0])], tuple(args[0].shape), tuple(size)))
        return func(*args, **(kwargs or {}))


def resized_input_error(model, args: tuple, kwargs: dict[str, Any],
                        names: list[str]) -> str | None:
    """After export failed: why, when ``model`` resizes an input to a higher rank in place
    (run once in eager on copies of the example inputs); else None."""
    copies = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    kw_copies = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
    named = {id(t): n for n, t in [*zip(names, copies), *kw_copies.items()]
             if isinstance(t, torch.Tensor)}
    recorder = _ResizeRecorder(named)
    try:
        with torch.no_grad(), recorder:
            model(*copies, **kw_copies)
    except Exception:  # noqa: BLE001  (the export error is the one reported then)
        return None
    changed = [(n, before, size) for n, before, size in recorder.found if len(size) > len(before)]
    if not changed:
        return None
    name, before, size = changed[0]
    return (f"the model resizes its input {name!r} in place from {list(before)} to "
            f"{list(size)} (aten.resize_): torch.export cannot capture an in-place resize that "
            f"raises an input's rank (it fails while producing the input guards). Accepted: "
            f"resize a copy (x = x.clone().resize_(...)), or a size of no higher rank (then the "
            f"compiled module returns the resized values; the caller's tensor keeps its shape)")
