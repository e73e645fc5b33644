"""The partition strategies by name (``settings.partitioner``). A strategy maps the unit graph
(``units.UnitGraph``) to segments in a valid execution order; ``driver.partition`` applies
the shared rules around it. "linear" is the naive baseline of seed 000, not a user choice."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..settings import CompilationSettings
from .dependency_aware import dependency_aware_segments
from .fast import fast_segments, linear_segments
from .global_partition import global_segments
from .hierarchical import hierarchical_segments
from .result import Segment
from .units import UnitGraph


@dataclass(frozen=True)
class Strategy:
    name: str
    run: Callable[[UnitGraph, CompilationSettings], list[Segment]]
    multi_backend: bool = False  # targets come from backend_priority, not just trt/torch


STRATEGIES: dict[str, Strategy] = {}


def register_strategy(name: str, multi_backend: bool = False):
    """Register ``fn(units, settings) -> list[Segment]`` under ``name``."""

    def wrap(fn):
        STRATEGIES[name] = Strategy(name, fn, multi_backend)
        return fn

    return wrap


register_strategy("fast")(lambda units, settings: fast_segments(units))
register_strategy("global")(lambda units, settings: global_segments(
    units, 1 if settings.require_full_compilation else settings.min_block_size))
register_strategy("dependency_aware")(lambda units, settings: dependency_aware_segments(
    units, 1 if settings.require_full_compilation else settings.min_block_size))
register_strategy("hierarchical", multi_backend=True)(
    lambda units, settings: hierarchical_segments(units))
register_strategy("linear")(lambda units, settings: linear_segments(units))
