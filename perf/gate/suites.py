"""What the regression gate measures: the ``quick`` suite (CI) and the ``full`` suite, as
groups. A group is what one fresh process measures (one zoo model compiled once, one
converter family's micro-benchmark, the canary loop) and yields several series."""

from __future__ import annotations

from dataclasses import dataclass

CANARY = "canary"
CANARY_SERIES = f"{CANARY}/cpu"  # the loop: machine speed (gate.machine_drift)
COLD_CANARY = f"{CANARY}/cold/cpu"  # a cold process's memory work: disturbed runs


def is_canary(series: str) -> bool:
    """Whether ``series`` measures the machine (shown, never gated)."""
    return series.split("/", 1)[0] == CANARY


@dataclass(frozen=True)
class Suite:
    name: str
    models: tuple[str, ...]  # zoo models, each compiled once per fresh process
    processes: int  # rounds in one run: each opens new servers, one process per group
    families: bool = True  # the converter-family micro-benchmarks (all families)
    # fresh processes per compile group in each round (a run's samples: processes x this)
    compile_children: int = 1
    # decoder LLMs (torch_trt_ref.llm.models, 2 layers): compiled with llm.compile over a
    # static KV cache, then prefill and decode timed (issue 39), one process per round
    llms: tuple[str, ...] = ()

    def children(self, group: str) -> int:
        """Fresh processes ``group`` gets in each round."""
        return self.compile_children if group.startswith("compile:") else 1

    @property
    def built(self) -> tuple[str, ...]:
        """The groups a count server builds before its first fork (Note [What a count
        server holds])."""
        return tuple(f"compile:{m}" for m in self.models) + tuple(f"llm:{m}" for m in self.llms)

    def groups(self, families: list[str]) -> list[str]:
        """The groups of this suite, given the converter families the worker found."""
        return (list(self.built)
                + ([f"family:{f}" for f in families] if self.families else []) + [CANARY])


SUITES = {
    # ~1 min of CPU on 2 cores: four small models (partition-heavy, several segments, a
    # transformer, a CNN), 24 converter families, the canaries; 3 rounds of new servers, and
    # 3 processes per compile in each (a compile child costs 0.2-1.5 s, a round's servers
    # ~10 s; TensorRT's build phase takes one of two levels per process, ~0.21 or ~0.28 s on
    # resnet18, so the minimum of 3 processes often missed the lower one: docs/regressions.md)
    "quick": Suite("quick", ("lgamma_graph", "unconvertible", "bert_2layer", "resnet18"), 3,
                   compile_children=3, llms=("gpt2",)),
    "full": Suite("full", ("lgamma_graph", "unconvertible", "bert_2layer", "resnet18",
                           "mobilenet_v2", "gpt2_2layer", "llama_2layer", "qwen2_2layer",
                           "t5_2layer"), 5, llms=("gpt2", "llama")),
}


def suite(name: str) -> Suite:
    try:
        return SUITES[name]
    except KeyError:
        raise ValueError(f"unknown suite {name!r}; accepted: {', '.join(SUITES)}") from None


def is_compile(series: str) -> bool:
    """Whether ``series`` comes from compiling a model (``compile/...``, ``llm/...``): what
    the A/B screen measures on another machine."""
    return series.startswith(("compile/", "llm/"))


def is_compile_group(group: str) -> bool:
    """Whether ``group`` compiles a model (``compile:MODEL``, ``llm:NAME``)."""
    return group.startswith(("compile:", "llm:"))


def group_of(series: str) -> str:
    """The group whose process measures ``series``: ``compile/bert_2layer/cpu/total`` ->
    ``compile:bert_2layer``, ``family/unary/cpu`` -> ``family:unary``, ``canary/cpu`` ->
    ``canary``."""
    parts = series.split("/")
    return CANARY if parts[0] == CANARY else f"{parts[0]}:{parts[1]}"


def server_kind(group: str) -> str:
    """Which prepared worker measures ``group``: "families" (graphs built once) or
    "compile" (nothing compiled before the fork, so each compile starts cold)."""
    return "families" if group.startswith("family:") else "compile"
