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
