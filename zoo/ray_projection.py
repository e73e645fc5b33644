"""How long a recorded sweep would take on N nodes: the recorded per-cell times scheduled
longest-first onto N x CPUs slots (a greedy bound within 4/3 of the best schedule), plus a
per-task overhead (a fresh worker's start). The sweep can never be shorter than its longest
cell, whatever the cluster.

    python -m zoo.ray_projection out/zoo_quick.jsonl --nodes 1 2 8 64 --cpus-per-node 2
    python -m zoo.ray_projection --overhead-runs 10     # measure the per-task overhead here
"""

from __future__ import annotations

import argparse
import heapq
import statistics
import subprocess
import sys
import time
from typing import Sequence

from .schema import read_records

# Seconds a Ray task adds before its cell starts: a fresh worker process (max_calls=1), the
# median of 10 empty tasks on this 2-core machine, quiet (0.59-0.63 s; docs/ray.md); a plain
# subprocess starts in 0.02 s. The cell's own imports are in its recorded time.
TASK_OVERHEAD_SECONDS = 0.6


def projected_seconds(cell_seconds: Sequence[float], slots: int,
                      overhead: float = TASK_OVERHEAD_SECONDS) -> float:
    """Makespan of longest-processing-time-first scheduling on ``slots`` parallel slots."""
    finish = [0.0] * max(1, slots)
    for seconds in sorted(cell_seconds, reverse=True):
        heapq.heapreplace(finish, finish[0] + seconds + overhead)
    return max(finish)


def table(cell_seconds: Sequence[float], nodes: Sequence[int], cpus_per_node: int,
          overhead: float = TASK_OVERHEAD_SECONDS) -> list[str]:
    total, longest = sum(cell_seconds), max(cell_seconds, default=0.0)
    lines = [f"{len(cell_seconds)} cells, {total:.0f} s of cells in all, the longest "
             f"{longest:.0f} s (no cluster can finish sooner)", "",
             "| nodes | slots | projected wall | speed-up vs 1 node |", "|---|---|---|---|"]
    one = projected_seconds(cell_seconds, cpus_per_node, overhead)
    for n in nodes:
        wall = projected_seconds(cell_seconds, n * cpus_per_node, overhead)
        lines.append(f"| {n} | {n * cpus_per_node} | {wall:.0f} s | {one / wall:.1f}x |")
    return lines


def _empty() -> None:
    return None


def measure_overhead(runs: int) -> dict[str, list[float]]:
    """Seconds from submitting an empty Ray task in a fresh worker (``max_calls=1``, as a
    zoo cell runs) to its result, one at a time, on a local Ray instance; beside it, a plain
    ``python -c pass`` subprocess, alternating."""
    from .ray_runner import start

    ray = start(None, 1)
    try:
        task = ray.remote(num_cpus=1, max_calls=1, max_retries=0)(_empty)
        ray.get(task.remote())  # the instance's own start-up is not a task's overhead
        out: dict[str, list[float]] = {"ray_task": [], "subprocess": []}
        for _ in range(runs):
            t = time.perf_counter()
            ray.get(task.remote())
            out["ray_task"].append(time.perf_counter() - t)
            t = time.perf_counter()
            subprocess.run([sys.executable, "-c", "pass"], check=True)
            out["subprocess"].append(time.perf_counter() - t)
        return out
    finally:
        ray.shutdown()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("records", nargs="*", help="JSON-lines records of a zoo run")
    parser.add_argument("--nodes", nargs="+", type=int, default=[1, 2, 8, 64])
    parser.add_argument("--cpus-per-node", type=int, default=2,
                        help="cells a node runs at once (one CPU each; default 2)")
    parser.add_argument("--overhead", type=float, default=TASK_OVERHEAD_SECONDS,
                        help="seconds a task adds before its cell starts")
    parser.add_argument("--overhead-runs", type=int, metavar="N",
                        help="instead: measure the per-task overhead N times on a local Ray "
                             "instance (and a plain subprocess beside it)")
    args = parser.parse_args(argv)
    if args.overhead_runs:
        for name, values in measure_overhead(args.overhead_runs).items():
            print(f"{name}: median {statistics.median(values):.3f} s, min {min(values):.3f}, "
                  f"max {max(values):.3f} ({len(values)} runs)")
        return 0
    if not args.records:
        parser.error("give zoo records to project, or --overhead-runs N")
    seconds = [r.get("wall_seconds") or r.get("cell_seconds") or 0.0
               for r in read_records(args.records)]
    print("\n".join(table(seconds, args.nodes, args.cpus_per_node, args.overhead)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
