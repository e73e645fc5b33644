"""Shared fixtures: a fresh converter registry per test that wants to register converters."""

import pytest
import torch

from torch_trt_ref.compiler import CONVERTERS


@pytest.fixture
def registry():
    """A copy of the built-in registry; registrations in a test never leak."""
    return CONVERTERS.copy()


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
