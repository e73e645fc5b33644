"""``python -m perf.studies.phase_ab --base DIR``: the per-phase profile of one compile, the base
checkout (``DIR``, e.g. a worktree of main) against this tree, in fresh processes that
alternate base/new (ABBA), on the peer's exact models (``zoo.partition_anchor``).

Each process builds the model, exports it once outside the window (as the peer side by side
does), then compiles it once and reports the compile report's CPU and wall seconds per
phase, the CPU seconds of the whole ``compile`` (work outside the report's phases, e.g.
taking ownership of the weights, included) and the peak RSS above the RSS before
``compile`` (``torch_trt_ref.memory.PeakRSS``); wall time outside the TensorRT builder
calls themselves (``EngineRecord.build_seconds``) compares commits whose "build" phase
held different work. Prints the best of the rounds and the
spread (max - min) per phase and side; ``--out`` writes every
sample as JSON (perf-data/results/phase_ab.json)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CHILD = r"""
import gc, json, sys, time, warnings
warnings.filterwarnings("ignore")
import torch, torch_trt_ref
from torch_trt_ref.memory import PeakRSS
from zoo.partition_anchor import peer_models
model, x = peer_models()[sys.argv[1]]()
model.eval()
with torch.no_grad():
    torch.export.export(model, (x,))
gc.collect()
with PeakRSS() as peak:
    start, cpu = time.perf_counter(), time.process_time()
    compiled = torch_trt_ref.compile(model, [x])
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
report = compiled.compile_report
print("@@" + json.dumps({"cpu": report.phases_cpu, "wall": report.phases, "total_wall": wall,
                         "total_cpu": cpu, "peak_mib": peak.above_baseline / 2**20,
                         "builder_calls": sum(e.build_seconds for e in report.engines)}))
"""


def sample(tree: Path, model: str) -> dict:
    """One fresh process compiling ``model`` with the library of ``tree``."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    out = subprocess.run([sys.executable, "-c", CHILD, model], capture_output=True, text=True,
                         env=env, cwd=tree, timeout=900)
    for line in out.stdout.splitlines():
        if line.startswith("@@"):
            return json.loads(line[2:])
    raise RuntimeError(f"{tree} {model}: no result\n{out.stderr[-1500:]}")


def summary(samples: list[dict]) -> dict:
    """Best and spread (max - min) of each phase's CPU seconds, of CPU outside the builder
    with and without capture, and of peak RSS."""
    def rows(key):
        values = [key(s) for s in samples]
        return {"best": round(min(values), 3), "spread": round(max(values) - min(values), 3)}

    phases = sorted({p for s in samples for p in s["cpu"]})
    out = {f"cpu_{p}": rows(lambda s, p=p: s["cpu"].get(p, 0.0)) for p in phases}
    out["cpu_outside_phases"] = rows(lambda s: s["total_cpu"] - sum(s["cpu"].values()))
    out["cpu_outside_builder_excl_capture"] = rows(
        lambda s: s["total_cpu"] - s["cpu"].get("build", 0.0) - s["cpu"].get("capture", 0.0))
    out["wall_outside_builder_excl_capture"] = rows(
        lambda s: s["total_wall"] - s["wall"].get("build", 0.0) - s["wall"].get("capture", 0.0))
    # The same with only the TensorRT builder calls taken out: before the "engine" phase
    # existed, "build" also held the network snapshot (like for like across commits).
    out["wall_outside_builder_calls_excl_capture"] = rows(
        lambda s: s["total_wall"] - s["builder_calls"] - s["wall"].get("capture", 0.0))
    out["peak_mib"] = rows(lambda s: s["peak_mib"])
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m perf.studies.phase_ab", description=__doc__)
    parser.add_argument("--base", required=True, type=Path,
                        help="checkout of the base commit (its torch_trt_ref and zoo are used)")
    parser.add_argument("--models", default="resnet18,gpt2_small",
                        help="comma-separated names of zoo.partition_anchor's peer models")
    parser.add_argument("--rounds", type=int, default=3, help="processes per side and model")
    parser.add_argument("--out", type=Path, help="write every sample and the summary here")
    args = parser.parse_args(argv)
    if not (args.base / "torch_trt_ref").is_dir():
        parser.error(f"--base {args.base}: no torch_trt_ref package there")
    result = {"base": str(args.base), "new": str(ROOT), "loadavg": [], "models": {}}
    for model in args.models.split(","):
        runs: dict[str, list] = {"base": [], "new": []}
        for r in range(args.rounds):
            order = ("base", "new") if r % 2 == 0 else ("new", "base")
            for side in order:
                runs[side].append(sample(args.base if side == "base" else ROOT, model))
                print(f"{model} round {r} {side}: {runs[side][-1]['cpu']}", file=sys.stderr)
        result["models"][model] = {side: {"samples": s, "summary": summary(s)}
                                   for side, s in runs.items()}
        result["loadavg"].append(Path("/proc/loadavg").read_text().split()[:3])
        for side in ("base", "new"):
            print(model, side, json.dumps(result["models"][model][side]["summary"]))
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
