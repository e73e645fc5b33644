"""Lowering: decompositions to a small op set, then an ordered pipeline of FX passes."""

from .decompositions import DECOMPOSITIONS, decomposition_table, register_decomposition  # noqa: F401
from .pipeline import lower  # noqa: F401
from .program import lower_program  # noqa: F401
