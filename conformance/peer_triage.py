"""Triage of the cells that fail through Torch-TensorRT (``python -m conformance --backend
torch_tensorrt``): cell-id pattern (``fnmatch``) -> (class, evidence). Classes: ``peer_bug``
(a converter of Torch-TensorRT builds a network that computes something else; a repro a
Torch-TensorRT developer can run on a GPU is in conformance/peer_repros/), ``executor`` (our
reference executor read a layer wrongly: fixed, with a test; the entry stays while the fix
is in and the cell passes, so it is listed for the record only), ``deviation`` (accepted:
a documented difference that is neither side's bug). The evidence names an oracle we did not
write where one exists. The first matching pattern decides."""

from __future__ import annotations

import fnmatch

PEER_BUG, EXECUTOR, DEVIATION = "peer_bug", "executor", "deviation"
CLASSES = (PEER_BUG, EXECUTOR, DEVIATION)

TRIAGE: dict[str, tuple[str, str]] = {
}


def classify(cell_id: str) -> tuple[str, str] | None:
    """(class, evidence) of a failing cell, or None when it is not triaged yet."""
    for pattern, entry in TRIAGE.items():
        if fnmatch.fnmatchcase(cell_id, pattern):
            return entry
    return None
