"""Helpers the reference-layer tests share: run one layer kind of the reference executor on
torch tensors (``run``: its outputs; ``run_one``: its only output) and float32 literals."""

from __future__ import annotations

import torch

from torch_trt_ref.runtime.reference.registry import REFERENCE_LAYERS


def run(kind: str, inputs, **attrs) -> tuple:
    """The outputs of reference layer ``kind`` on ``inputs`` with attributes ``attrs``."""
    return REFERENCE_LAYERS[kind].run(list(inputs), **attrs)


def run_one(kind: str, inputs, **attrs) -> torch.Tensor:
    """The only output of reference layer ``kind`` (fails if it has several)."""
    (out,) = run(kind, inputs, **attrs)
    return out


def f32(values) -> torch.Tensor:
    """``values`` as a float32 tensor."""
    return torch.tensor(values, dtype=torch.float32)
