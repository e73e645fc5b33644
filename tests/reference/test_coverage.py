"""Every reference layer kind the snapshot knows has hand-derived unit tests. (A layer kind
without a reference function makes compile fall back or fail loudly: compiler.py.)"""

from pathlib import Path

import torch_trt_ref.runtime.snapshot  # noqa: F401  (registers the reference layers)
from torch_trt_ref.runtime.reference.registry import REFERENCE_LAYERS

HERE = Path(__file__).resolve().parent


def test_every_reference_layer_kind_has_unit_tests():
    text = "\n".join(p.read_text() for p in HERE.glob("test_*_layers.py"))
    untested = sorted(kind for kind in REFERENCE_LAYERS if f'"{kind}"' not in text)
    assert not untested, f"reference layer kinds without hand-derived tests: {untested}"
