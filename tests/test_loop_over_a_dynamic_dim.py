"""A dim the model fixes by a Python loop over its size (transformers' Mamba without its
kernels: ``for index in range(seq_len)`` in its slow forward), issue 36 item 7. Declared
dynamic over many sizes, the compile split it one size per nested compile and did not finish
in 14 minutes; now it says in seconds that the dim cannot be dynamic, naming the dim and the
model line. Over a few sizes each is compiled on its own and matches eager."""

import copy
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import torch

import torch_trt_ref
from torch_trt_ref import Input
from torch_trt_ref.accuracy import judge

ROOT = Path(__file__).resolve().parents[1]

MAMBA = """
import torch
from transformers import MambaConfig, MambaModel
torch.manual_seed(0)
model = MambaModel(MambaConfig(vocab_size=100, hidden_size=16, num_hidden_layers=1,
                               state_size=4, use_cache=False)).eval()
"""


def test_many_sizes_of_a_looped_dim_fail_in_seconds_naming_the_dim_and_the_line():
    """In a fresh process with a generous timeout: a regression to "never finishes" fails
    here instead of hanging the suite."""
    script = MAMBA + textwrap.dedent("""
        import torch_trt_ref
        from torch_trt_ref import Input
        from torch_trt_ref.capture import DynamicShapeError
        spec = Input(min_shape=(1, 2), opt_shape=(1, 8), max_shape=(2, 16),
                     dtype=torch.int64, high=100)
        try:
            torch_trt_ref.compile(model, [spec], min_block_size=1)
        except DynamicShapeError as err:
            print("ERROR", err)
    """)
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    message = run.stdout
    assert "ERROR the model fixes the size of input 'input_ids' dim 1" in message
    assert "modeling_mamba.py" in message and "for index in range(seq_len)" in message
    assert "more than 8 other declared sizes" in message


def test_a_few_sizes_of_a_looped_dim_are_compiled_each_on_its_own():
    scope: dict = {}
    exec(MAMBA, scope)  # noqa: S102  (the model above, in this process)
    model = scope["model"]
    spec = Input(min_shape=(2, 4), opt_shape=(2, 5), max_shape=(3, 5), dtype=torch.int64,
                 high=100)
    compiled = torch_trt_ref.compile(model, [spec], min_block_size=1)
    assert [b["sizes"] for b in compiled.compile_report.size_branches] == [
        {"input 0 dim 1": [5, 5]}, {"input 0 dim 1": [4, 4]}]
    model64 = copy.deepcopy(model).double()
    for shape in ((2, 4), (3, 4), (2, 5), (3, 5)):
        ids = torch.randint(0, 100, shape)
        with torch.no_grad():
            verdict = judge(compiled(ids).last_hidden_state, model(ids).last_hidden_state,
                            model64(ids).last_hidden_state)
        assert verdict.passed, f"{shape}: {verdict.message}"
