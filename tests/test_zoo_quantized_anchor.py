"""Quantization adds no engine: the partition anchor table (zoo/partition_anchor.py) of a
quantized model has the fp32 model's engines and transitions, for every forced op and
strategy (partition only, no engine built)."""

import argparse

import pytest

from zoo import cli
from zoo.partition_anchor import measure


@pytest.mark.parametrize("precision", ["int8", "nvfp4"])
def test_quantized_partition_equals_fp32(precision):
    def counts(p):
        return {(r.forced, r.strategy): (r.engines, r.transitions)
                for r in measure(["bert_tiny_2l"], lambda line: None, p)}

    fp32, quantized = counts("fp32"), counts(precision)
    assert fp32[("none", "fast")] == (1, 0)
    assert quantized == fp32


def test_anchors_command_takes_a_precision():
    parser = argparse.ArgumentParser()
    cli.add_subcommands(parser.add_subparsers())
    args = parser.parse_args(["zoo", "anchors", "--precision", "fp8", "--models", "resnet18"])
    assert args.precision == "fp8"
    with pytest.raises(SystemExit):
        parser.parse_args(["zoo", "anchors", "--precision", "int4"])


def test_attention_quantizers_add_no_engine():
    """quantize(..., attention=True) makes each fused SDPA one torch_trt_ref::quantized_sdpa
    node (docs/quantization.md): for every forced op and strategy the quantized model has
    the fp32 engines and transitions (with the SDPA written out as its math, mul forced gave
    3 engines against 1, layer norm forced 5 against 4)."""
    import torch

    from torch_trt_ref.capture import capture
    from torch_trt_ref.compiler import lower_program
    from torch_trt_ref.partitioning import partition
    from torch_trt_ref.quantization.attention_op import QUANTIZED_SDPA
    from torch_trt_ref.settings import CompilationSettings
    from zoo.partition_anchor import FORCED, MIN_BLOCK_SIZE, STRATEGIES, peer_models
    from zoo.quantized import prepare

    counts = []
    for attention in (False, True):
        torch.manual_seed(0)
        model, example = peer_models()["bert_tiny_2l"]()
        if attention:
            model, _ = prepare(model.eval(), "int8", (example,), {}, attention=True)
        ep = capture(model.eval(), [example])
        found = {}
        for forced in FORCED:
            settings = CompilationSettings(
                min_block_size=MIN_BLOCK_SIZE,
                torch_executed_ops=frozenset() if forced == "none" else frozenset({forced}))
            gm = lower_program(ep, settings)
            sdpa = [n for n in gm.graph.nodes if n.target == QUANTIZED_SDPA]
            assert len(sdpa) == (2 if attention else 0)
            for strategy in STRATEGIES:
                result = partition(gm, settings, strategy=strategy)
                found[forced, strategy] = (result.count("tensorrt"), result.transitions())
        counts.append(found)
    assert counts[0][("aten.mul.Tensor", "fast")] == (1, 0)
    assert counts[1] == counts[0]
