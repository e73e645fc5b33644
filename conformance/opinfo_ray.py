"""The OpInfo conformance set on Ray: the cells of one OpInfo are one Ray task (samples are
made once per OpInfo, as in the local pool), on a local Ray instance or an existing cluster.
A task whose worker dies yields a "harness_error" outcome for each of its cells; the report
and the verdicts are the local run's. Ray is optional (the [ray] extra); Ray is started, and
imported, by the zoo's ray_runner."""

from __future__ import annotations

import json
import time

from zoo import ray_runner

from .opinfo import CellKey, Outcome


def run_groups_on_ray(groups: list[list[CellKey]], run_op, progress: str | None,
                      address: str | None = None) -> dict[str, dict]:
    """``run_op(keys) -> [(cell id, outcome json)]`` for every group, as Ray tasks; each
    finished group is appended to ``progress`` (JSON lines) as it comes."""
    ray = ray_runner.start(address)  # a clear error saying how to install Ray when it is missing
    from ray.exceptions import RayError

    try:
        task = ray.remote(num_cpus=1, max_retries=0)(run_op)
        pending = {task.remote(keys): keys for keys in groups}
        cells, done, start = {}, 0, time.time()
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            keys = pending.pop(ready[0])
            try:
                results = ray.get(ready[0])
            except RayError as err:  # the worker died: every cell of the group says so
                message = f"Ray worker died ({type(err).__name__}): {err}"
                results = [(k.id, Outcome("harness_error", message).to_json()) for k in keys]
            cells.update(results)
            if progress:
                with open(progress, "a") as f:
                    f.writelines(json.dumps({c: v}) + "\n" for c, v in results)
            done += 1
            if done % 50 == 0 or not pending:
                print(f"[opinfo on ray] {done}/{len(groups)} OpInfos, {len(cells)} cells, "
                      f"{time.time() - start:.0f}s", flush=True)
        return cells
    finally:
        ray.shutdown()
