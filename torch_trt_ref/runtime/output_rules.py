"""Output rules: how each engine output's dtype and shape follow from the engine's input
shapes — the dtype, rank and static dims TensorRT inferred, and each dynamic dim as a Python
expression over the input dims (``in0_1`` is dim 1 of input 0), read off the symbolic shapes
torch.export attached to the segment's graph. The custom op's fake implementation computes
its outputs from them; a size no input determines (a data-dependent output) becomes a new
unbacked size."""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import sympy
import torch
from torch.fx import GraphModule
from torch.utils._sympy.functions import FloorDiv, Max, Min, Mod, PythonMod

from .engine import Engine

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class OutputRule:
    """How one engine output's dtype and shape follow from the engine's input shapes: a
    dim is an int, a Python expression over ``in<i>_<d>`` (dim d of input i), or ``?name``
    for a size no input determines."""

    dtype: torch.dtype
    dims: tuple[int | str, ...]

    def shape(self, inputs: Sequence[torch.Tensor], fresh: Callable[[str], Any]) -> list:
        """The dims for these inputs (ints or SymInts); ``fresh(name)`` gives the size of
        a ``?name`` dim (the fake implementation's new unbacked size)."""
        env = {f"in{i}_{d}": size for i, t in enumerate(inputs) for d, size in enumerate(t.shape)}
        return [dim if isinstance(dim, int) else fresh(dim) if dim.startswith("?")
                else eval(_code(dim), _EVAL_GLOBALS, env)  # our own expression text
                for dim in self.dims]


_EVAL_GLOBALS = {"__builtins__": {}, "sym_max": torch.sym_max, "sym_min": torch.sym_min}


@functools.lru_cache(maxsize=None)
def _code(expression: str):
    return compile(expression, "<output rule>", "eval")


# -- output rules from the segment's symbolic shapes ------------------------------------
def _expr(size) -> sympy.Expr | int:
    if isinstance(size, torch.SymInt):
        expr = size.node.expr
        return int(expr) if expr.is_number else expr
    return int(size)


def _python(expr: sympy.Expr) -> str:
    """Python source for a shape expression (ints and SymInts both evaluate it)."""
    if expr.is_Integer or expr.is_Symbol:
        return str(expr)
    if expr.is_Add:
        return "(" + " + ".join(_python(a) for a in expr.args) + ")"
    if expr.is_Mul:
        coeff, rest = expr.as_coeff_Mul()
        body = " * ".join(_python(a) for a in sympy.Mul.make_args(rest))
        if coeff.is_Integer:
            return body if coeff == 1 else f"({int(coeff)} * {body})"
        return f"(({int(coeff.p)} * {body}) // {int(coeff.q)})"  # exact where the rule holds
    if expr.is_Pow and expr.exp.is_Integer and expr.exp > 0:
        return f"({_python(expr.base)} ** {int(expr.exp)})"
    if isinstance(expr, FloorDiv):
        return f"({_python(expr.args[0])} // {_python(expr.args[1])})"
    if isinstance(expr, (Mod, PythonMod)):
        return f"({_python(expr.args[0])} % {_python(expr.args[1])})"
    if isinstance(expr, (Max, Min)):
        name = "sym_max" if isinstance(expr, Max) else "sym_min"
        code = _python(expr.args[0])
        for arg in expr.args[1:]:
            code = f"{name}({code}, {_python(arg)})"
        return code
    raise NotImplementedError(f"no Python form for shape expression {expr}")


def output_rules(segment: GraphModule | None, engine: Engine) -> list[OutputRule]:
    """The rules of an engine built from ``segment``. The engine decides dtypes, ranks and
    every dim TensorRT inferred as static; a dynamic dim (TensorRT's -1) is the segment's
    symbolic expression with each symbol replaced by an input dim equal to it (or solved
    from one holding only it), else unknown (``?``). Where the segment's graph disagrees
    with the engine on an output's rank (its meta kernel and its eager kernel disagree:
    ``prims.sum`` over ``dims=[]`` is a no-op in meta, a full sum in eager and in the
    engine), the engine's rule stands."""
    network = [OutputRule(dtype, tuple(d if d >= 0 else f"?{i}_{j}" for j, d in enumerate(
        _snapshot_shape(engine, name))))
        for i, (name, dtype) in enumerate(zip(engine.output_names, engine.output_dtypes))]
    if segment is None:
        return network
    try:
        graph = _rules_from_segment(segment)
    except (KeyError, AttributeError, NotImplementedError) as err:
        log.info("engine output rules from the network alone: %s", err)
        return network
    if len(graph) != len(network):
        return network
    return [_merge(n, g) for n, g in zip(network, graph)]


def _merge(network: OutputRule, graph: OutputRule) -> OutputRule:
    if len(network.dims) != len(graph.dims):
        return network
    return OutputRule(network.dtype, tuple(n if isinstance(n, int) else g
                                           for n, g in zip(network.dims, graph.dims)))


def _rules_from_segment(segment: GraphModule) -> list[OutputRule]:
    placeholders = [n for n in segment.graph.nodes if n.op == "placeholder"]
    dims = {}  # input-dim expression -> its name
    for i, node in enumerate(placeholders):
        for d, size in enumerate(node.meta["val"].shape):
            expr = _expr(size)
            if not isinstance(expr, int):
                dims.setdefault(expr, sympy.Symbol(f"in{i}_{d}", integer=True, positive=True))
    subs = {e: s for e, s in dims.items() if e.is_Symbol}
    for expr, name in dims.items():
        free = expr.free_symbols
        if len(free) == 1 and not free <= subs.keys():
            (symbol,) = free
            solved = sympy.solve(sympy.Eq(expr, name), symbol)
            if len(solved) == 1:
                subs[symbol] = solved[0]
    output = next(n for n in segment.graph.nodes if n.op == "output")
    values = output.args[0] if isinstance(output.args[0], (tuple, list)) else [output.args[0]]
    rules = []
    for k, node in enumerate(values):
        val = node.meta["val"]
        rule_dims: list[int | str] = []
        for d, size in enumerate(val.shape):
            expr = _expr(size)
            if isinstance(expr, int):
                rule_dims.append(expr)
            elif expr in dims:
                rule_dims.append(str(dims[expr]))
            else:
                known = expr.xreplace(subs)
                inputs_only = all(s.name.startswith("in") and s in dims.values()
                                  for s in known.free_symbols)
                rule_dims.append(_python(known) if inputs_only else f"?{k}_{d}")
        rules.append(OutputRule(val.dtype, tuple(rule_dims)))
    return rules


def _snapshot_shape(engine: Engine, name: str) -> tuple[int, ...]:
    """The shape TensorRT inferred for the network tensor ``name`` (-1 where dynamic)."""
    snapshot = engine.snapshot
    for info in [*snapshot.inputs, *(t for layer in snapshot.layers for t in layer.outputs)]:
        if info.name == name:
            return info.shape
    raise KeyError(f"the engine's network has no tensor {name}")

