"""``python -m perf.bench.run``: run the pytest-benchmark suites, express each result as a
ratio to the calibration workload of the same run, and fail when a ratio grew beyond the
threshold compared with perf-data/baselines/perf.json (``--update-baseline`` rewrites it)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from .baseline import DEFAULT_THRESHOLD, compare, render, summarize

ROOT = Path(__file__).resolve().parents[2]
BASELINE = ROOT / "perf-data" / "baselines" / "perf.json"


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
    parser.add_argument("--baseline", type=Path, default=BASELINE)
    parser.add_argument("--results", type=Path, default=ROOT / "out" / "perf.json",
                        help="pytest-benchmark JSON written by the run (or read, --no-run)")
    parser.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD,
                        help="calibrated ratio new/base above which a benchmark regressed")
    parser.add_argument("--no-run", action="store_true", help="compare existing --results")
    parser.add_argument("--update-baseline", action="store_true",
                        help="write this run's ratios as the new baseline")
    parser.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    args = parser.parse_args(argv)
    code = 0 if args.no_run else run_suites(args.results, args.pytest_args)
    if code != 0:
        # a failing assertion in one suite must not hide the timings of the others
        print(f"perf suites failed (pytest exit code {code}); comparing what ran",
              file=sys.stderr)
        if not args.results.exists():
            return code
    summary = summarize(json.loads(args.results.read_text()))
    if args.update_baseline:
        args.baseline.parent.mkdir(parents=True, exist_ok=True)
        args.baseline.write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n")
        print(f"wrote baseline {args.baseline}", file=sys.stderr)
        return code
    if not args.baseline.exists():
        print(f"no baseline at {args.baseline}; create it with --update-baseline",
              file=sys.stderr)
        return code
    rows = compare(json.loads(args.baseline.read_text()), summary, args.threshold)
    print(render(rows, args.threshold))
    return 1 if any(r.verdict == "REGRESSED" for r in rows) else code


if __name__ == "__main__":
    sys.exit(main())
