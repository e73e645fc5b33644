"""Work counters: exact counts of what a compile did (FX nodes after each lowering pass,
partitioner steps), off unless a caller counts. The regression gate (perf/) reads them: a
count does not depend on the machine, so any increase is a finding, not noise."""

from __future__ import annotations

from collections import Counter
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Iterator

_COUNTS: ContextVar[Counter | None] = ContextVar("torch_trt_ref_work_counts", default=None)


@contextmanager
def counting() -> Iterator[Counter]:
    """Count the work of the compiles inside the block into the yielded Counter."""
    counts: Counter = Counter()
    token = _COUNTS.set(counts)
    try:
        yield counts
    finally:
        _COUNTS.reset(token)


def add(name: str, n: int = 1) -> None:
    """Add ``n`` to counter ``name`` when a caller is counting (else nothing, ~50 ns)."""
    counts = _COUNTS.get()
    if counts is not None:
        counts[name] += n
