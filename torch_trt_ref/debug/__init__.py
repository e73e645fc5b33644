"""The layer-wise divergence finder (Polygraphy's ``debug`` without a GPU): ``compare``
finds the first FX node whose compiled value leaves the float64 rule; ``reduce`` shrinks a
failing model to the smallest failing subgraph and writes a standalone repro script;
``Debugger`` records per-pass FX graphs, engine layer tables and per-layer times."""

from .compare import compare  # noqa: F401
from .debugger import PASS_NAMES, Debugger  # noqa: F401
from .reduce import Reduction, reduce  # noqa: F401
from .report import DivergenceReport, NodeRecord  # noqa: F401

__all__ = ["Debugger", "PASS_NAMES", "compare", "reduce", "Reduction", "DivergenceReport",
           "NodeRecord"]
