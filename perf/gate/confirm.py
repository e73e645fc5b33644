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

from .rules import AB_EACH, TIME_TYPES, Confirmation, abba
from .runner import say
from .suites import is_canary
from .worker import ROOT, MeasureError


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


def resolve_commit(rev: str) -> str:
    """The full hash of commit ``rev`` in this clone; a ValueError naming ``rev`` when git
    finds no such commit (checked before anything is measured: issue 36)."""
    done = subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"],
                          cwd=ROOT, capture_output=True, text=True)
    if done.returncode or not done.stdout.strip():
        raise ValueError(f"--base {rev!r} is not a commit of this clone; give a commit hash, "
                         "branch or tag it holds (git log --oneline), or fetch it first (a "
                         "shallow clone lacks history: git fetch --unshallow)")
    return done.stdout.strip()


class BaseCannotMeasure(ValueError):
    """The base tree cannot measure a suspect's group (its library lacks something the
    measurement needs, or it builds none of the family's cases): the suspect is left
    unconfirmed with a warning, as when the base is not in the clone."""


@contextlib.contextmanager
def base_side(group: str) -> Iterator[None]:
    """A MeasureError of the base's pool becomes BaseCannotMeasure."""
    try:
        yield
    except MeasureError as err:
        raise BaseCannotMeasure(f"the base cannot measure {group}: {err}") from err


def common_cases(group: str, pool_a, pool_b) -> list[str] | None:
    """For a family group, the case ids both trees built, in A's order (None for other
    groups): both sides then convert the same graphs."""
    if not group.startswith("family:"):
        return None
    family = group.partition(":")[2]
    with base_side(group):
        base = set(pool_b.family_cases(family))
        skipped = pool_b.skipped_cases()
    ours = pool_a.family_cases(family)
    common = [c for c in ours if c in base]
    if not common:
        raise BaseCannotMeasure(f"the base built none of the {len(ours)} cases of {group}"
                                + (f" (case modules it cannot import: {skipped})"
                                   if skipped else ""))
    if len(common) < len(ours):
        say(f"confirming {group} on the {len(common)} of its {len(ours)} cases the base "
            f"built (left out: {', '.join(c for c in ours if c not in base)})")
    return common


def confirm_group(group: str, names: list[str] | None, pool_a, pool_b, each: int = AB_EACH,
                  inject_a: dict | None = None,
                  side_a: list[dict] | None = None) -> list[Confirmation]:
    """Measure ``group`` ``each`` times on each side, ABBA, and return the confirmations of
    series ``names`` (None: every time series the first process of side A measured, the
    canaries' aside); ``inject_a`` goes to side A only (perf/gate/sensitivity.py), and each
    of side A's results goes to ``side_a`` too (the A/B screen's measurement of the working
    tree). A series left borderline (``Confirmation.borderline``) gets ``each`` more
    processes per side, once, and is judged on all of them. A family converts the same
    cases on both sides (``common_cases``); raises BaseCannotMeasure when the base cannot
    measure the group."""
    found: dict[str, Confirmation] = {}
    cases = common_cases(group, pool_a, pool_b)

    def processes(wanted: list[str] | None, label: str) -> list[str]:
        order = abba(each)
        for i, side in enumerate(order, 1):
            if side == "A":
                result = pool_a.measure(group, inject_a, cases)
                if side_a is not None:
                    side_a.append(result)
                if wanted is None:
                    wanted = [n for n, v in result.items()
                              if v["type"] in TIME_TYPES and not is_canary(n)]
            else:
                with base_side(group):
                    result = pool_b.measure(group, None, cases)
            for name in wanted:
                if name not in result:
                    raise ValueError(f"{group} measured no series {name!r} on side {side}")
                c = found.setdefault(name, Confirmation(name, result[name]["type"]))
                (c.a if side == "A" else c.b).append(result[name]["value"])
            if i % 4 == 0:
                say(f"{label} {group}: {i}/{len(order)} processes")
        return wanted

    names = processes(names, "confirming")
    close = [n for n in names if found[n].borderline]
    if close:
        say(f"{len(close)} close to the line ({', '.join(close)}): {each} more per side")
        processes(close, "extending")
    return [found[n] for n in names]
