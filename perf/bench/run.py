"""``python -m perf.bench.run``: run the pytest-benchmark suites (the side by side with
Torch-TensorRT excepted), write pytest-benchmark's JSON, and print each benchmark's best
time and its ratio to the calibration workload of the same run. Nothing is compared with a
stored baseline and nothing fails on a timing: the regression gate (``torch-trt-ref perf
gate``, docs/regressions.md) is the one check across commits."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from .ratios import render, summarize

ROOT = Path(__file__).resolve().parents[2]


def run_suites(results: Path, pytest_args: list[str]) -> int:
    results.parent.mkdir(parents=True, exist_ok=True)
    # the side by side with Torch-TensorRT (~8 minutes, its own venv) runs on its own:
    # python -m pytest perf/bench/test_peer_bench.py --benchmark-enable -s
    bench = ROOT / "perf" / "bench"
    cmd = [sys.executable, "-m", "pytest", str(bench), "-q", "-p", "no:cacheprovider",
           "--ignore", str(bench / "test_peer_bench.py"),
           "--benchmark-enable", f"--benchmark-json={results}", *pytest_args]
    print("+", " ".join(cmd), file=sys.stderr)
    return subprocess.run(cmd, cwd=ROOT).returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m perf.bench.run", description=__doc__)
    parser.add_argument("--results", type=Path, default=ROOT / "out" / "perf.json",
                        help="pytest-benchmark JSON written by the run (or read, --no-run)")
    parser.add_argument("--no-run", action="store_true",
                        help="print the ratios of existing --results")
    parser.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    args = parser.parse_args(argv)
    code = 0 if args.no_run else run_suites(args.results, args.pytest_args)
    if code != 0:
        # a failing assertion in one suite must not hide the timings of the others
        print(f"perf suites failed (pytest exit code {code}); showing what ran",
              file=sys.stderr)
        if not args.results.exists():
            return code
    print(render(summarize(json.loads(args.results.read_text()))))
    return code


if __name__ == "__main__":
    sys.exit(main())
