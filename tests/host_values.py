"""A recorder of what a CUDA graph capture forbids that a CPU run can show (tests of the
resolved replay: tests/test_llm.py, tests/test_resolved_replay.py)."""

from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode


class HostValues(TorchDispatchMode):
    """Records a tensor made from host values (``torch.tensor``: lift_fresh) and a value read
    back (``int``, ``item``: _local_scalar_dense)."""

    FORBIDDEN = {torch.ops.aten.lift_fresh.default, torch.ops.aten._local_scalar_dense.default}

    def __init__(self):
        super().__init__()
        self.seen = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func in self.FORBIDDEN:
            self.seen.append(func)
        return func(*args, **(kwargs or {}))
