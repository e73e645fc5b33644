"""One run of a suite: wait for the machine to quieten (bounded), measure every group in
fresh processes (round-robin, so slow drift spreads evenly; new measuring servers each
round), and the run's header (commit,
machine, load at start and end, versions) for perf-data/history."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Callable

from zoo.schema import cpu_model

from . import store
from .suites import CANARY, Suite, group_of
from .worker import ROOT, Pool

MAX_WAIT = 120.0  # seconds a run started under heavy load waits before it goes ahead
LOAD_LIMIT_PER_CORE = 2.0  # 1-minute load average per core above which a run is loaded


def say(message: str) -> None:
    print(f"[perf] {message}", file=sys.stderr, flush=True)


def load_limit() -> float:
    return LOAD_LIMIT_PER_CORE * (os.cpu_count() or 1)


def wait_for_quiet(max_wait: float = MAX_WAIT, limit: float | None = None,
                   poll: float = 10.0) -> tuple[list, bool]:
    """(load average at the start, loaded): waits up to ``max_wait`` seconds for the
    1-minute load to fall under ``limit`` (default ``load_limit()``); still over it, the
    run is loaded."""
    limit = limit or load_limit()
    deadline = time.monotonic() + max_wait
    while os.getloadavg()[0] > limit and time.monotonic() < deadline:
        say(f"load {os.getloadavg()[0]:.1f} > {limit:.1f}: waiting (at most "
            f"{deadline - time.monotonic():.0f} s more)")
        time.sleep(poll)
    load = list(os.getloadavg())
    return load, load[0] > limit


def run_suite(suite: Suite, open_pool: Callable[[], Pool], processes: int | None = None,
              groups: list[str] | None = None,
              inject: dict[str, dict] | None = None,
              keep: Callable[[str], bool] = lambda group: True) -> dict[str, store.Series]:
    """Every group of ``suite`` (or ``groups``; ``keep``: only those it accepts) measured in
    ``processes`` rounds, each round ``suite.children(group)`` fresh processes per group
    forked from new measuring servers (``open_pool()``: a server's layout and heap are
    shared by every child it forks, so servers are sampled too); ``inject`` maps a group to
    its test-only slowdown (perf/gate/inject.py)."""
    processes = processes or suite.processes
    series: dict[str, store.Series] = {}
    start = time.monotonic()
    for rep in range(processes):
        with open_pool() as pool:
            groups = groups or [g for g in suite.groups(
                pool.families() if suite.families else []) if keep(g)]
            for i, group in enumerate(groups, 1):
                if i % 10 == 1 or i == len(groups):
                    say(f"process round {rep + 1}/{processes}: {group} ({i}/{len(groups)}, "
                        f"{time.monotonic() - start:.0f} s)")
                for _ in range(suite.children(group)):
                    for name, v in pool.measure(group, (inject or {}).get(group)).items():
                        s = series.setdefault(name, store.Series(name, v["unit"], v["type"]))
                        s.samples.append(v["value"])
    for s in series.values():  # a round that lost a sample leaves one group (its minimum)
        s.rounds = processes if len(s.samples) % processes == 0 else 1
    return series


def count_suite(suite: Suite, open_pool: Callable[[], Pool], groups: list[str] | None = None,
                inject: dict[str, dict] | None = None) -> dict[str, store.Series]:
    """The count tier of ``suite`` (or ``groups``): one fresh process per group from one
    count server (``open_pool()``: a worker.CountPool); counts repeat exactly, so one
    process is the measurement (docs/regressions.md, "The count tier")."""
    series: dict[str, store.Series] = {}
    start = time.monotonic()
    with open_pool() as pool:
        groups = groups or [g for g in suite.groups(pool.families() if suite.families else [])
                            if g != CANARY]
        for i, group in enumerate(groups, 1):
            if i % 10 == 1 or i == len(groups):
                say(f"counting: {group} ({i}/{len(groups)}, {time.monotonic() - start:.0f} s)")
            for name, v in pool.measure(group, (inject or {}).get(group)).items():
                series[name] = store.Series(name, v["unit"], v["type"], [v["value"]])
    return series


def grouped(names: list[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for name in names:
        out.setdefault(group_of(name), []).append(name)
    return out


def _git(*args: str, cwd: Path = ROOT) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                          check=True).stdout.strip()


def _version(*names: str) -> str | None:
    for name in names:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def revision() -> dict:
    """The commit, its parent and whether tracked files differ from it: taken when a run
    starts, so a commit made while it runs does not relabel it."""
    try:
        parent = _git("rev-parse", "HEAD^")
    except subprocess.CalledProcessError:
        parent = None
    return {"commit": _git("rev-parse", "HEAD"), "parent": parent,
            "dirty": bool(_git("status", "--porcelain", "--untracked-files=no"))}


def header(suite: str, load_start: list, load_end: list, loaded: bool,
           rev: dict | None = None) -> dict:
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {**(rev or revision()), "suite": suite, "time": store.utc_now(),
            "machine": {"cpu": cpu_model(), "cores": os.cpu_count(),
                        "mem_gib": round(mem, 1), "node": platform.node()},
            "load": {"start": load_start, "end": load_end}, "loaded": loaded,
            "versions": {"python": platform.python_version(), "torch": _version("torch"),
                         "tensorrt": _version("tensorrt", "tensorrt-rtx", "tensorrt_rtx"),
                         "transformers": _version("transformers")}}


def as_records(series: dict[str, store.Series]) -> list[dict]:
    return [{"name": s.name, "unit": s.unit, "type": s.type, "samples": s.samples,
             "rounds": s.rounds} for s in series.values()]
