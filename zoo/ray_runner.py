"""Zoo sweeps on Ray: every cell a Ray task in a fresh worker process (``max_calls=1``), on a
local Ray instance started for the sweep or on an existing cluster (``address``).

The isolation is the local runner's: a worker that dies (segfault, ``os._exit``, the memory
monitor) becomes that cell's ``crashed`` record, a cell past its timeout is cancelled and
becomes ``timeout``, and the sweep goes on. Each task asks for CPUs and for memory estimated
from the model's weight bytes, so the scheduler does not pack two big compiles on one small
node. Results arrive in any order; the driver writes them in the matrix order. Ray is an
optional dependency (``pip install -e ".[ray]"``): only this module imports it (the
OpInfo sweep on Ray starts it through ``start``)."""

from __future__ import annotations

import functools
import os
import sys
import time
from datetime import datetime, timezone
from typing import Any, Callable, Sequence

from .harness import failed_record, new_run_id, worker_pythonpath
from .matrix import Cell
from .schema import write_record

INSTALL_HINT = ('--ray needs Ray, which is not installed: pip install -e ".[ray]" '
                '(or pip install "ray[default]")')
# Memory a cell asks for: the process floor (torch, transformers and TensorRT imported) plus
# a multiple of the model's weight bytes (the model, the compile's copies, the builder).
BASE_MEMORY_BYTES = 1_500 * 2**20
MEMORY_PER_WEIGHT_BYTE = 6
DEFAULT_CPUS_PER_CELL = 1


def import_ray():
    """The ``ray`` module, or a clear error saying how to install it."""
    try:
        import ray
    except ImportError:
        raise ValueError(INSTALL_HINT) from None
    return ray


@functools.lru_cache(maxsize=None)
def weight_bytes_estimate(model: str) -> int | None:
    """The zoo model's weight bytes, from a build on the meta device (no memory, no time),
    else from a real build (a factory that runs the model, e.g. to calibrate BatchNorm);
    None when it cannot be built at all (the cell will say why)."""
    import torch

    from .registry import get

    for device in ("meta", "cpu"):
        try:
            with torch.device(device):
                module = get(model).factory()
        except Exception:  # noqa: BLE001  (try the next way; the cell reports real errors)
            continue
        tensors = {id(t): t for t in [*module.parameters(), *module.buffers()]}  # tied once
        return sum(t.numel() * t.element_size() for t in tensors.values())
    return None


def memory_request(weight_bytes: int | None) -> int:
    """Bytes of memory a cell asks Ray for (``BASE_MEMORY_BYTES`` when unknown)."""
    return BASE_MEMORY_BYTES + MEMORY_PER_WEIGHT_BYTE * (weight_bytes or 0)


def _run_cell_task(cell_json: dict, measure: dict) -> dict:
    """The task body, in a fresh Ray worker: the same measurement as ``python -m zoo.cell``,
    stamped with where it ran."""
    import ray

    from .cell import measure_cell

    record = measure_cell(cell_json, measure)
    record["env"].update(runner="ray", node=ray.util.get_node_ip_address(), pid=os.getpid())
    return record


def _crash_record(cell: Cell, status: str, kind: str, message: str) -> dict:
    record = failed_record(cell, status, kind, message)
    record["env"].update(runner="ray", node=None, pid=None)
    return record


def start(address: str | None, num_cpus: int | None = None):
    """Connect to ``address`` (``auto``, ``ray://host:10001``) or start a local instance
    (``num_cpus`` CPUs, default all); the project root is on the workers' ``PYTHONPATH``."""
    ray = import_ray()
    runtime_env = {"env_vars": {"PYTHONPATH": worker_pythonpath()}}
    if address:
        ray.init(address=address, runtime_env=runtime_env, log_to_driver=False)
    else:
        ray.init(num_cpus=num_cpus, include_dashboard=False, runtime_env=runtime_env,
                 log_to_driver=False)
    return ray


def sweep_on_ray(cells: Sequence[Cell], out: str | os.PathLike, *, timeout: float,
                 measure: dict[str, Any] | None = None, progress: bool = True,
                 on_record: Callable[[dict], None] | None = None, address: str | None = None,
                 num_cpus: int | None = None, cpus_per_cell: int = DEFAULT_CPUS_PER_CELL,
                 task_body: Callable[[dict, dict], dict] | None = None) -> list[dict]:
    """Run ``cells`` as Ray tasks and append their records to ``out`` in the order of
    ``cells``. Ctrl-C cancels the outstanding tasks (the records written so far stay).
    ``task_body`` replaces the measurement (tests use it to make a worker crash)."""
    ray = start(address, num_cpus)
    try:
        return _sweep(ray, cells, out, timeout, measure or {}, progress, on_record,
                      cpus_per_cell, task_body or _run_cell_task)
    finally:
        ray.shutdown()


def _sweep(ray, cells, out, timeout, measure, progress, on_record, cpus_per_cell, body):
    """Keep as many tasks in flight as the cluster has CPUs for (so a task starts when it is
    submitted and its timeout counts from then), collect them as they finish."""
    from .harness import progress_bar

    run_id = new_run_id()
    task = ray.remote(max_calls=1, max_retries=0)(body)
    slots = max(1, int(ray.cluster_resources().get("CPU", 1) // cpus_per_cell))
    queue = list(enumerate(cells))
    pending: dict[Any, tuple[int, float]] = {}  # ref -> (index in cells, submission time)
    results: dict[int, dict] = {}
    written: list[dict] = []
    bar = progress_bar(len(cells), progress)
    try:
        while queue or pending:
            while queue and len(pending) < slots:
                i, cell = queue.pop(0)
                memory = memory_request(weight_bytes_estimate(cell.model))
                ref = task.options(num_cpus=cpus_per_cell, memory=memory).remote(
                    cell.to_json(), measure)
                pending[ref] = (i, time.perf_counter())
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=1.0)
            now = time.perf_counter()
            for ref in ready:
                i, submitted = pending.pop(ref)
                results[i] = _outcome(ray, ref, cells[i])
                _finish(results[i], run_id, now - submitted)
                bar.update(1)
            for ref, (i, submitted) in list(pending.items()):
                if now - submitted > timeout:
                    ray.cancel(ref, force=True)
                    del pending[ref]
                    results[i] = _crash_record(cells[i], "timeout", "TimeoutExpired",
                                               f"cell did not finish within {timeout:.0f} s")
                    _finish(results[i], run_id, now - submitted)
                    bar.update(1)
            written += _flush(results, len(written), out, on_record)
    except KeyboardInterrupt:
        for ref in pending:
            ray.cancel(ref, force=True)
        print(f"\nzoo: interrupted; cancelled {len(pending) + len(queue)} cell(s); "
              f"{len(written)} record(s) in {out}", file=sys.stderr)
        raise
    finally:
        bar.close()
    return written


def _outcome(ray, ref, cell: Cell) -> dict:
    """The task's record, or a ``crashed`` record when its worker died."""
    from ray.exceptions import RayError

    try:
        return ray.get(ref)
    except RayError as err:
        return _crash_record(cell, "crashed", type(err).__name__, str(err))


def _finish(record: dict, run_id: str, seconds: float) -> None:
    record["run_id"] = run_id
    record["isolation"] = "ray"
    record["timestamp"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    record["wall_seconds"] = seconds


def _flush(results: dict[int, dict], done: int, out, on_record) -> list[dict]:
    """Write the records that continue the matrix order from ``done``."""
    flushed = []
    while done + len(flushed) in results:
        record = results.pop(done + len(flushed))
        write_record(out, record)
        flushed.append(record)
        if on_record is not None:
            on_record(record)
    return flushed
