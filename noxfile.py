"""nox sessions: tests, conformance, executor, zoo, perf, perf_bench, lint, docs,
peer_conformance. Virtualenvs are reused, so a second run does not reinstall torch (~5 GB)."""

from __future__ import annotations

import os
from pathlib import Path

import nox

nox.options.reuse_existing_virtualenvs = True
nox.options.sessions = ["lint", "tests"]


def _install(session: nox.Session) -> None:
    session.install("-e", ".[dev]")


@nox.session
def tests(session: nox.Session) -> None:
    """Unit, property and conformance tests (the CI gate)."""
    _install(session)
    session.run("pytest", "-n", "2", "--dist", "loadgroup", *session.posargs)


@nox.session
def full_checks(session: nox.Session) -> None:
    """The tests with every generated check's full set (TORCH_TRT_REF_OPINFO=full): every
    OpInfo sample, every zoo model's dynamic lowering routes, the full-size models that CI
    leaves to their smaller twins (GPT-2 quantized, BERT-base/GPT-2/Llama/T5 lowering)."""
    _install(session)
    session.run("pytest", "-n", "2", "--dist", "loadgroup", *session.posargs,
                env={"TORCH_TRT_REF_OPINFO": "full"})


# The oldest torch the runtime supports (pyproject.toml; torch_trt_ref/runtime/opaque.py).
RUNTIME_TORCH = "2.11.0"


@nox.session
def runtime_floor(session: nox.Session) -> None:
    """The runtime on the oldest supported torch, without TensorRT: programs are saved with
    the newest torch and TensorRT first (`.[dev]`), then loaded and run (CPU, and CUDA
    where there is a GPU) in an environment of torch 2.11 and no TensorRT
    (tests/runtime_floor.py)."""
    programs = session.create_tmp()
    _install(session)
    session.run("python", "tests/runtime_floor.py", "save", programs)
    session.run("pip", "uninstall", "-y", "tensorrt-rtx", "tensorrt")
    session.install(f"torch=={RUNTIME_TORCH}", "torchvision", "transformers")
    session.run("python", "tests/runtime_floor.py", "check", programs)


@nox.session
def lint(session: nox.Session) -> None:
    session.install("ruff")
    session.run("ruff", "check", "torch_trt_ref", "zoo", "conformance", "perf", "tests",
                "noxfile.py")


@nox.session
def conformance(session: nox.Session) -> None:
    """Op-level conformance suite; writes out/conformance.{json,md}."""
    _install(session)
    session.run("pytest", "conformance", "-n", "2", "-q",
                "--conformance-json", "out/conformance.json", *session.posargs)
    session.run("python", "-m", "conformance.report", "out/conformance.json",
                "--markdown", "out/conformance.md")
    # PyTorch's OpInfo samples, every OpInfo x dtype x sample (~30 min on 2 cores; CI runs
    # the first sample of each converted cell through conformance/test_opinfo.py)
    session.run("python", "-m", "conformance.opinfo_report", "--full", "-j", "2",
                "--json", "out/opinfo.json", "--markdown", "out/opinfo.md")


@nox.session
def executor(session: nox.Session) -> None:
    """Reference executor vs ONNX's node test cases; writes out/onnx_nodes.{json,md}."""
    _install(session)
    session.run("pytest", "conformance/test_onnx_nodes.py", "-q", *session.posargs)
    session.run("python", "-m", "conformance.onnx_report", "--json", "out/onnx_nodes.json",
                "--markdown", "out/onnx_nodes.md")


@nox.session
def zoo(session: nox.Session) -> None:
    """Quick zoo subset by default; `nox -s zoo -- --full` for the whole matrix."""
    _install(session)
    session.run("torch-trt-ref", "zoo", "run", *(session.posargs or ["--quick"]))


@nox.session
def perf(session: nox.Session) -> None:
    """The regression gate (docs/regressions.md): `nox -s perf` screens the quick suite
    against perf-data/history and confirms suspects A/B; `nox -s perf -- run --suite full
    --record` records a run; `-- calibrate`, `-- history ...` likewise."""
    _install(session)
    session.run("torch-trt-ref", "perf", *(session.posargs or ["gate", "--suite", "quick"]))


@nox.session
def perf_bench(session: nox.Session) -> None:
    """pytest-benchmark suites: JSON in out/perf.json, each best time also as a ratio to the
    calibration workload of the same run; no stored baseline, no verdict (the regression
    gate is `nox -s perf`)."""
    _install(session)
    session.run("python", "-m", "perf.bench.run", *session.posargs)


@nox.session
def docs(session: nox.Session) -> None:
    """Runs the code blocks of README.md and docs/*.md."""
    _install(session)
    session.run("pytest", "tests/test_docs.py", "-q")


# Torch-TensorRT's own environment (../shared/peer/setup.sh): 5 GB, built once and reused.
PEER_VENV = os.environ.get("PEER_VENV", os.path.expanduser("~/.cache/torch-trt-peer-venv"))
PEER_SETUP = Path(__file__).resolve().parent.parent / "shared" / "peer" / "setup.sh"


@nox.session(python=False)
def peer_conformance(session: nox.Session) -> None:
    """The conformance suite through Torch-TensorRT itself (DESIGN D16): its pipeline builds
    the networks, our reference executor runs them (`python -m conformance --backend
    torch_tensorrt`); out/peer_conformance.json. The peer's venv ($PEER_VENV, else
    ~/.cache/torch-trt-peer-venv) is made by ../shared/peer/setup.sh when missing; this
    checkout goes on PYTHONPATH, nothing is installed into it."""
    python = Path(PEER_VENV) / "bin" / "python"
    if not python.exists():
        session.run("bash", str(PEER_SETUP), PEER_VENV, external=True)
    session.run(str(python), "-m", "conformance", "--backend", "torch_tensorrt",
                *session.posargs, env={"PYTHONPATH": str(Path(__file__).resolve().parent)},
                external=True)
