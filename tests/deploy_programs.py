"""The compiled programs that tests/test_save_load.py and tests/test_export_pt2.py save,
load and export: resnet18 (static, 64x64), a default-attention (sdpa) BERT with a dynamic
sequence length, and a small convnet with a dynamic batch whose PyTorch segment sits
between two engines. Each is compiled, exported, saved in every format and loaded in one
fresh process once per test session (``fresh``)."""

from __future__ import annotations

import copy
import functools
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torchvision
import transformers
from torch.utils._pytree import tree_flatten

import torch_trt_ref
from torch_trt_ref import Input
from torch_trt_ref.accuracy import judge, to_float64


class ConvSigmoidConv(torch.nn.Module):
    """conv -> relu -> sigmoid (kept in PyTorch) -> conv -> pool -> linear."""

    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(8, 8, 3, padding=1)
        self.head = torch.nn.Linear(8, 5)

    def forward(self, x):
        y = torch.sigmoid(torch.relu(self.conv1(x)))
        return self.head(self.conv2(y).mean((2, 3)))


@dataclass
class Program:
    """A model, its compiled module, the inputs it is checked at (min, opt and max of a
    dynamic range) and, per input, the compiled module's outputs and eager's in fp32 and
    float64; ``dynamic_shapes`` for torch.export."""

    model: torch.nn.Module
    compiled: torch.fx.GraphModule
    inputs: list[tuple[torch.Tensor, ...]]
    dynamic_shapes: Any
    compiled_outputs: list[Any]
    eager: list[Any]
    eager64: list[Any]


def _program(model, spec, inputs, dynamic_shapes, **settings) -> Program:
    compiled = torch_trt_ref.compile(model, [spec], **settings)
    model64 = copy.deepcopy(model).double()
    with torch.no_grad():
        compiled_outputs = [compiled(*args) for args in inputs]
        eager = [model(*args) for args in inputs]
        eager64 = [model64(*to_float64(args)) for args in inputs]
    return Program(model, compiled, inputs, dynamic_shapes, compiled_outputs, eager, eager64)


def resnet18() -> Program:
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval()
    x = torch.randn(1, 3, 64, 64, generator=torch.Generator().manual_seed(1))
    return _program(model, x, [(x,)], None)


def bert() -> Program:
    torch.manual_seed(0)
    config = transformers.BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                                     intermediate_size=128, vocab_size=100,
                                     max_position_embeddings=64)
    model = transformers.BertModel(config).eval()
    assert config._attn_implementation == "sdpa"  # the library default
    spec = Input(min_shape=(1, 1), opt_shape=(1, 8), max_shape=(1, 32), dtype=torch.int64,
                 high=100)
    gen = torch.Generator().manual_seed(2)
    inputs = [(torch.randint(0, 100, (1, n), generator=gen),) for n in (1, 8, 32)]
    seq = torch.export.Dim("seq", min=1, max=32)
    return _program(model, spec, inputs, ({1: seq},))


def conv_sigmoid_conv() -> Program:
    torch.manual_seed(0)
    model = ConvSigmoidConv().eval()
    spec = Input(min_shape=(1, 3, 16, 16), opt_shape=(2, 3, 16, 16), max_shape=(4, 3, 16, 16))
    gen = torch.Generator().manual_seed(3)
    inputs = [(torch.randn(n, 3, 16, 16, generator=gen),) for n in (1, 2, 4)]
    batch = torch.export.Dim("batch", min=1, max=4)
    return _program(model, spec, inputs, ({0: batch},), min_block_size=1,
                    torch_executed_ops={"aten.sigmoid.default"})


BUILDERS = {"resnet18": resnet18, "bert": bert, "conv_sigmoid_conv": conv_sigmoid_conv}


@functools.cache
def program(name: str) -> Program:
    return BUILDERS[name]()


ROOT = Path(__file__).resolve().parents[1]


def run_fresh(script: str, *args: str) -> subprocess.CompletedProcess:
    """Run ``script`` in a new Python process that imports this checkout's torch_trt_ref,
    with ResourceWarnings shown; fails with the process's stderr if it fails."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    result = subprocess.run([sys.executable, "-W", "always::ResourceWarning", "-c", script,
                             *args], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stderr[-4000:]
    return result


def same(got, want) -> bool:
    """Same output structure (types included, e.g. a transformers ModelOutput) and equal
    tensors, bit for bit."""
    got_leaves, got_spec = tree_flatten(got)
    want_leaves, want_spec = tree_flatten(want)
    return got_spec == want_spec and all(
        torch.equal(a, b) for a, b in zip(got_leaves, want_leaves))


@functools.cache
def exported(name: str) -> torch.export.ExportedProgram:
    p = program(name)
    return torch.export.export(p.compiled, p.inputs[len(p.inputs) // 2],
                               dynamic_shapes=p.dynamic_shapes)


FORMATS = {"torch_trt_ref.save": "ttrt", "torch.save": "pt", "torch.export.save": "pt2"}

# .pt2 files first, before anything imports torch_trt_ref: their engines import it.
# (transformers.modeling_outputs registers the pytree type of BERT's output, which the
# .pt2 file names but, unlike a pickle, does not import.)
LOAD_ALL = """
import sys
from pathlib import Path
import torch
import transformers.modeling_outputs

folder = Path(sys.argv[1])
inputs = torch.load(folder / "inputs.pt")
results = {}

def run(name, fmt, module, **facts):
    with torch.no_grad():
        outputs = [module(*args) for args in inputs[name]]
    results[name, fmt] = {"outputs": outputs, **facts}

for name in inputs:
    program = torch.export.load(folder / f"{name}.pt2")
    engines = [n for n in program.graph.nodes
               if n.target is torch.ops.torch_trt_ref.execute_engine.default]
    run(name, "torch.export.save", program.module(), engines=len(engines),
        ranges=str(program.range_constraints))

import torch_trt_ref

for name in inputs:
    for fmt, module in (("torch_trt_ref.save", torch_trt_ref.load(folder / f"{name}.ttrt")),
                        ("torch.save", torch.load(folder / f"{name}.pt", weights_only=False))):
        run(name, fmt, module, executors=torch_trt_ref.executors_used(module),
            report=module.compile_report.to_json())
torch.save(results, folder / "results.pt")
"""


@functools.cache
def fresh() -> tuple[dict, str]:
    """Every program saved in every format, then loaded and run on its inputs in one new
    process: the results per (model, format) and the process's stderr."""
    folder = Path(tempfile.mkdtemp(prefix="torch_trt_ref_deploy_"))
    try:
        for name in BUILDERS:
            torch_trt_ref.save(program(name).compiled, folder / f"{name}.ttrt")
            torch.save(program(name).compiled, folder / f"{name}.pt")
            torch.export.save(exported(name), folder / f"{name}.pt2")
        torch.save({name: program(name).inputs for name in BUILDERS}, folder / "inputs.pt")
        process = run_fresh(LOAD_ALL, str(folder))
        return torch.load(folder / "results.pt", weights_only=False), process.stderr
    finally:
        shutil.rmtree(folder)


def check_loaded_outputs(name: str, p: Program, outputs: list, what: str) -> None:
    """A loaded program's outputs: equal to the compiled module's at every input (same
    engines, same executor), and within the float64 rule of eager."""
    for args, got, want, eager, eager64 in zip(p.inputs, outputs, p.compiled_outputs,
                                                p.eager, p.eager64):
        shapes = [tuple(a.shape) for a in args]
        assert same(got, want), f"{name} at {shapes}: {what} output differs from the compiled"
        verdict = judge(got, eager, eager64)
        assert verdict.passed, f"{name} at {shapes}: {verdict.message}"
