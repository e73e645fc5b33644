"""The confirmation step: a suspect's group re-measured against the base commit, checked
out as a ``git worktree``, in alternating fresh processes (ABBA), then judged by
``gate.Confirmation``."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Iterator

from .gate import AB_EACH, Confirmation, abba
from .runner import say
from .worker import ROOT


@contextlib.contextmanager
def base_checkout(rev: str) -> Iterator[Path]:
    """``rev`` checked out (detached) in a temporary git worktree, removed afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="perf-base-"))
    tree = folder / "base"
    done = subprocess.run(["git", "worktree", "add", "--detach", str(tree), rev], cwd=ROOT,
                          capture_output=True, text=True)
    if done.returncode:
        shutil.rmtree(folder, ignore_errors=True)
        raise ValueError(f"base {rev!r}: cannot check it out ({done.stderr.strip()}); give "
                         "--base a commit of this clone (a shallow clone lacks history: "
                         "fetch with --unshallow)")
    try:
        yield tree
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT,
                       capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)


def confirm_group(group: str, names: list[str], pool_a, pool_b, each: int = AB_EACH,
                  inject_a: dict | None = None) -> list[Confirmation]:
    """Measure ``group`` ``each`` times on each side, ABBA, and return the confirmations of
    series ``names``; ``inject_a`` goes to side A only (perf/sensitivity.py)."""
    found: dict[str, Confirmation] = {}
    order = abba(each)
    for i, side in enumerate(order, 1):
        result = (pool_a.measure(group, inject_a) if side == "A" else pool_b.measure(group))
        for name in names:
            if name not in result:
                raise ValueError(f"{group} measured no series {name!r} on side {side}")
            c = found.setdefault(name, Confirmation(name, result[name]["type"]))
            (c.a if side == "A" else c.b).append(result[name]["value"])
        if i % 4 == 0:
            say(f"confirming {group}: {i}/{len(order)} processes")
    return [found[n] for n in names]
