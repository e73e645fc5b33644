"""``zoo run --backend torch_tensorrt`` (zoo/peer_run.py, issue 41): one small zoo model
compiled by Torch-TensorRT itself beside our own compile, in the peer's environment when it
is installed (skipped, saying why, when not); the option checks run anywhere."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from zoo.cli import main

ROOT = Path(__file__).resolve().parent.parent
PEER_VENV = Path(os.environ.get("PEER_VENV", Path.home() / ".cache" / "torch-trt-peer-venv"))
PEER_PYTHON = PEER_VENV / "bin" / "python"


def test_peer_backend_refuses_cells_it_does_not_run(capsys):
    assert main(["run", "--backend", "torch_tensorrt", "--full"]) == 2
    assert "--backend torch_tensorrt runs --quick or --models" in capsys.readouterr().err


@pytest.mark.skipif(not PEER_PYTHON.exists(), reason=(
    f"Torch-TensorRT's environment is not installed at {PEER_VENV} (optional, ~5 GB: "
    "../shared/peer/setup.sh makes it; set PEER_VENV to use another)"))
def test_one_model_through_the_peer_beside_ours(tmp_path):
    out = tmp_path / "zoo_peer.jsonl"
    args = [str(PEER_PYTHON), "-m", "zoo", "run", "--backend", "torch_tensorrt", "--models",
            "lgamma_graph", "--precisions", "fp32", "--ours-python", sys.executable,
            "--out", str(out), "--no-progress"]
    done = subprocess.run(args, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    ours, peer = [json.loads(line) for line in out.read_text().splitlines()]
    assert (ours["backend"], peer["backend"]) == ("torch_trt_ref", "torch_tensorrt")
    assert ours["status"] == "ok" and peer["status"] == "ok", (ours["error"], peer["error"])
    # the peer converts x+y, x*y and the cat and leaves the three lgamma to PyTorch
    assert peer["ops"]["supported"] < peer["ops"]["total"]
    assert peer["partition"]["engines"] >= 1 and peer["partition"]["torch_segments"] >= 1
    assert peer["engines"]["layers"] > 0
    assert peer["accuracy"]["rule"] == "float64" and peer["accuracy"]["passed"]
    row = next(line for line in done.stdout.splitlines() if line.startswith("| lgamma_graph"))
    assert row.count("|") == 10
