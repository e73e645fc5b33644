"""``one_thread``: torch's CPU ops on one thread for a short stretch of compile work.

The first parallel op of a process starts torch's OpenMP pool, and after every parallel
region its threads spin before they sleep; both are paid in the compile's CPU and, on a
busy machine, its wall time. The tensors compile itself computes (folded constants, a
folded ``embedding`` of BERT's token types: 0.02 s of CPU in a fresh process, issue 25)
are too small to gain from more threads."""

from __future__ import annotations

from contextlib import contextmanager

import torch


@contextmanager
def one_thread():
    """Run the block with torch's intra-op threads set to 1, then set them back. (OpenMP
    keeps the count per calling thread, so other threads of the process are not slowed.)"""
    before = torch.get_num_threads()
    if before == 1:
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)
