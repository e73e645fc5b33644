"""The sweep matrix: a ``Cell`` is one (model, strategy, resource partitioning, precision)
compile; ``quick_matrix`` / ``full_matrix`` list the cells CI and the full sweep run."""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass
from typing import Any, Iterable

from torch_trt_ref.settings import PARTITIONERS, PRECISIONS

from .registry import QUICK, ZOO

QUICK_STRATEGIES = ("fast", "dependency_aware")
QUICK_PRECISIONS = ("fp32", "fp16")
# Resource-partitioning cells give each engine this fraction of the model's weight bytes
# (cpu_memory_budget = 4 x fraction x weights), so any model with weights must split.
DEFAULT_BUDGET_FRACTION = 0.35


@dataclass(frozen=True)
class Cell:
    model: str
    strategy: str
    precision: str
    resource_partitioning: bool = False
    budget_fraction: float = DEFAULT_BUDGET_FRACTION
    dynamic: bool = False

    @property
    def key(self) -> str:
        """Stable identity across runs: ``model/strategy[+rp]/precision[/dynamic]``."""
        strategy = self.strategy + ("+rp" if self.resource_partitioning else "")
        return "/".join([self.model, strategy, self.precision] + (["dynamic"] if self.dynamic
                                                                    else []))

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "key": self.key}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Cell":
        return cls(**{k: v for k, v in data.items() if k != "key"})


def matrix(models: Iterable[str], strategies: Iterable[str] = PARTITIONERS,
           precisions: Iterable[str] = PRECISIONS, resource_partitioning: Iterable[bool] = (False,),
           budget_fraction: float = DEFAULT_BUDGET_FRACTION, dynamic: bool = False) -> list[Cell]:
    """Every combination, model-major (so one model's cells run together)."""
    for s in strategies:
        if s not in PARTITIONERS:
            raise ValueError(f"unknown strategy {s!r}; use one of {list(PARTITIONERS)}")
    for p in precisions:
        if p not in PRECISIONS:
            raise ValueError(f"unknown precision {p!r}; use one of {list(PRECISIONS)}")
    return [Cell(m, s, p, rp, budget_fraction, dynamic) for m, s, rp, p in itertools.product(
        list(models), list(strategies), list(resource_partitioning), list(precisions))]


def quick_matrix() -> list[Cell]:
    """The CI subset: 5 small models x fast/dependency_aware x fp32/fp16 (20 cells)."""
    return matrix(QUICK, QUICK_STRATEGIES, QUICK_PRECISIONS)


def full_matrix() -> list[Cell]:
    """Every model x every strategy (with and without resource partitioning) x precision."""
    return matrix(ZOO, PARTITIONERS, PRECISIONS, (False, True))
