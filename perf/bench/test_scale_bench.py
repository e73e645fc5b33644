"""Compile at the size Torch-TensorRT's 2026 compile-time work targets (~3,400 lowered nodes,
pytorch/TensorRT#4596): GPT2LMHeadModel made deep and narrow (68 layers of width 64, 128
tokens), and the front end's growth from 1x to 4x the nodes (17, 34, 68 layers).

``test_front_end_growth`` times the front end (capture, lowering, partitioning: a dry-run
compile, nothing converted or built) at 1x, 2x and 4x in one run, alternating sizes, best of
``ROUNDS`` CPU seconds each, and keeps the growth exponent ``log(t4/t1) / log(n4/n1)`` (1.0 is
linear) in extra_info. ``test_compile_3400_nodes`` is the whole compile at 4x (conversion and
the TensorRT build included; one round, the build alone takes minutes on 2 cores)."""

from __future__ import annotations

import math
import time

import pytest
import torch

import torch_trt_ref

from .conftest import pedantic

LAYERS = {1: 17, 2: 34, 4: 68}  # scale -> layers: ~865, ~1,715, ~3,415 lowered nodes
ROUNDS = 3
SEQ = 128


def deep_gpt2(layers: int) -> tuple[torch.nn.Module, torch.Tensor]:
    """GPT2LMHeadModel with ``layers`` blocks of width 64 (2 heads), vocabulary 1024, random
    weights; ~50 lowered nodes per block."""
    import transformers

    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=layers, n_embd=64, n_head=2, vocab_size=1024,
                                     n_positions=256, use_cache=False)
    ids = torch.randint(0, 1024, (1, SEQ), generator=torch.Generator().manual_seed(0))
    return transformers.GPT2LMHeadModel(config).eval(), ids


def _front_end(model, ids) -> float:
    """CPU seconds of one dry-run compile (capture, lowering, partitioning)."""
    start = time.process_time()
    torch_trt_ref.compile(model, [ids], dryrun=True)
    return time.process_time() - start


def lowered_nodes(model, ids) -> int:
    """Nodes of the lowered graph (every FX node, as Torch-TensorRT's ``lowered_nodes``)."""
    from torch_trt_ref.capture import capture
    from torch_trt_ref.compiler import lower_program
    from torch_trt_ref.settings import CompilationSettings

    return len(lower_program(capture(model, [ids]), CompilationSettings()).graph.nodes)


def growth_exponent(points: dict[int, float]) -> float:
    """Least-squares slope of log(seconds) over log(nodes)."""
    xs = [math.log(n) for n in points]
    ys = [math.log(t) for t in points.values()]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return (sum((x - mx) * (y - my) for x, y in zip(xs, ys))
            / sum((x - mx) ** 2 for x in xs))


def test_front_end_growth(benchmark):
    models = {scale: deep_gpt2(layers) for scale, layers in LAYERS.items()}
    nodes = {scale: lowered_nodes(*pair) for scale, pair in models.items()}
    best: dict[int, float] = {}
    for _ in range(ROUNDS):
        for scale, (model, ids) in models.items():  # sizes alternate within each round
            best[scale] = min(best.get(scale, math.inf), _front_end(model, ids))
    model, ids = models[4]
    pedantic(benchmark, lambda: torch_trt_ref.compile(model, [ids], dryrun=True), rounds=1)
    exponent = growth_exponent({nodes[s]: best[s] for s in best})
    benchmark.extra_info.update(
        normalize_by="python", nodes={str(s): nodes[s] for s in nodes},
        front_end_cpu_seconds={str(s): round(best[s], 3) for s in best},
        growth_exponent=round(exponent, 3))
    assert nodes[4] > 3 * nodes[1]


@pytest.mark.slow
def test_compile_3400_nodes(benchmark):
    model, ids = deep_gpt2(LAYERS[4])
    compiled = pedantic(benchmark, lambda: torch_trt_ref.compile(model, [ids]), rounds=1)
    report = compiled.compile_report
    benchmark.extra_info.update(
        normalize_by="python", phases=dict(report.phases), phases_cpu=dict(report.phases_cpu),
        outside_builder_seconds=report.seconds_outside_builder(),
        engines=len(report.engines))
