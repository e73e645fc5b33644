"""The sweep matrix: a ``Cell`` is one (model, strategy, resource partitioning, precision)
compile; ``quick_matrix`` / ``full_matrix`` list the cells CI and the full sweep run."""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass
from typing import Any, Iterable

from torch_trt_ref.settings import COMPILE_PRECISIONS, PARTITIONERS, QUANT_FORMATS

from .entry import compile_precision
from .registry import QUICK, ZOO

QUICK_STRATEGIES = ("fast", "dependency_aware")
QUICK_PRECISIONS = ("fp32", "fp16")
QUICK_QUANTIZED = (("resnet18", "int8"), ("bert_2layer", "fp8"))
# Quick models whose strategies are compared (they split, or are the anchors of the strategy
# table); the other quick models convert whole under any strategy, so they run `fast` only.
QUICK_STRATEGY_MODELS = ("resnet18", "mobilenet_v2", "bert_2layer", "gpt2_2layer",
                         "lgamma_graph")
# Decoder-LLM cells (zoo/llm_cells.py): ``llm:NAME`` is NAME of torch_trt_ref.llm.models (2
# layers, hidden 64) decoding over a static KV cache; the quick sweep has the smallest one.
LLM_PREFIX = "llm:"
QUICK_LLM = ("llm:gpt2",)
# Resource-partitioning cells give each engine this fraction of the model's weight bytes
# (cpu_memory_budget = 4 x fraction x weights), so any model with weights must split.
DEFAULT_BUDGET_FRACTION = 0.35


@dataclass(frozen=True)
class Cell:
    """One compile of the sweep. ``precision`` is a compile precision (fp32/fp16/bf16) or a
    quantization format (int8/fp8/nvfp4: the model is quantized, then compiled in
    ``compile_precision``), as ``--precisions`` names it and records keep it."""

    model: str
    strategy: str
    precision: str
    resource_partitioning: bool = False
    budget_fraction: float = DEFAULT_BUDGET_FRACTION
    dynamic: bool = False

    @property
    def quant_format(self) -> str | None:
        """The quantization format of a quantized cell (``int8``/``fp8``/``nvfp4``), else
        None."""
        return self.precision if self.precision in QUANT_FORMATS else None

    @property
    def compile_precision(self) -> str:
        """The precision the cell compiles in (``entry.compile_precision``)."""
        return compile_precision(self.precision)

    @property
    def key(self) -> str:
        """Stable identity across runs: ``model/strategy[+rp]/precision[/dynamic]``."""
        strategy = self.strategy + ("+rp" if self.resource_partitioning else "")
        return "/".join([self.model, strategy, self.precision] + (["dynamic"] if self.dynamic
                                                                    else []))

    @property
    def is_llm(self) -> bool:
        """A decoder-LLM cell (``llm:NAME``: zoo/llm_cells.py), not a zoo model's compile."""
        return self.model.startswith(LLM_PREFIX)

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "key": self.key}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Cell":
        return cls(**{k: v for k, v in data.items() if k != "key"})


def matrix(models: Iterable[str], strategies: Iterable[str] = PARTITIONERS,
           precisions: Iterable[str] = COMPILE_PRECISIONS,
           resource_partitioning: Iterable[bool] = (False,),
           budget_fraction: float = DEFAULT_BUDGET_FRACTION, dynamic: bool = False) -> list[Cell]:
    """Every combination, model-major (so one model's cells run together)."""
    for s in strategies:
        if s not in PARTITIONERS:
            raise ValueError(f"unknown strategy {s!r}; use one of {list(PARTITIONERS)}")
    for p in precisions:
        if p not in COMPILE_PRECISIONS + QUANT_FORMATS:
            raise ValueError(f"unknown precision {p!r}; use one of "
                             f"{list(COMPILE_PRECISIONS + QUANT_FORMATS)}")
    return [Cell(m, s, p, rp, budget_fraction, dynamic) for m, s, rp, p in itertools.product(
        list(models), list(strategies), list(resource_partitioning), list(precisions))]


def quick_text_models() -> list[str]:
    """Quick transformers models with dynamic ``Input`` specs (sequence length 8-128)."""
    return [m for m in QUICK if "transformers" in ZOO[m].tags and ZOO[m].dynamic is not None]


def quick_matrix() -> list[Cell]:
    """The CI subset (34 cells): QUICK_STRATEGY_MODELS x fast/dependency_aware x fp32/fp16,
    the other quick models x fast x fp32/fp16, every quick text model with a dynamic
    sequence length (fast, fp32), QUICK_QUANTIZED (one int8 and one fp8 cell) and
    QUICK_LLM (a 2-layer GPT-2 generating over a static KV cache, fp32)."""
    others = [m for m in QUICK if m not in QUICK_STRATEGY_MODELS]
    return (matrix(QUICK_STRATEGY_MODELS, QUICK_STRATEGIES, QUICK_PRECISIONS)
            + matrix(others, ("fast",), QUICK_PRECISIONS)
            + matrix(quick_text_models(), ("fast",), ("fp32",), dynamic=True)
            + [Cell(m, "fast", p) for m, p in QUICK_QUANTIZED]
            + [Cell(m, "fast", "fp32") for m in QUICK_LLM])


def quantizable(model: str) -> bool:
    """CNNs and transformers get the quantized precisions (their Linear/Conv layers)."""
    return bool({"vision", "transformers"} & set(ZOO[model].tags))


def full_matrix() -> list[Cell]:
    """Every model x every strategy (with and without resource partitioning) x precision;
    CNNs and transformers also x int8/fp8/nvfp4."""
    return (matrix(ZOO, PARTITIONERS, COMPILE_PRECISIONS, (False, True))
            + matrix([m for m in ZOO if quantizable(m)], PARTITIONERS, QUANT_FORMATS,
                     (False, True)))
