"""The two decomposition routes of a captured program: node by node (the fast route) and the
whole program retraced by ``run_decompositions`` (its slow reference). The fast route must
give the reference's ops and outputs; tests/test_lowering_routes.py holds it to that."""

from __future__ import annotations

from torch.export import ExportedProgram
from torch.fx import GraphModule

from ..capture import flat_module
from .decompositions import decompose_locally
from .passes import functionalize_inplace


def node_by_node(ep: ExportedProgram, table: dict) -> GraphModule:
    """Copy the program's graph, make its in-place ops out-of-place and retrace only the
    nodes ``table`` (or a composite that cannot stay whole) covers. Raises
    NotLocallyLowerable for what it cannot handle (writes to inputs, weights or observed
    views; higher-order ops; a node that fails to trace). Not recompiled."""
    gm = flat_module(ep)
    functionalize_inplace(gm)
    decompose_locally(gm, table)
    functionalize_inplace(gm)  # a decomposition may write in place (as_strided_)
    return gm


def whole_program(ep: ExportedProgram, table: dict) -> GraphModule:
    """``ExportedProgram.run_decompositions``: the whole program traced again through the
    table (slower, always correct), unlifted to a flat module."""
    return ep.run_decompositions(table).module()
