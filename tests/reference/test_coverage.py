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


def test_every_tensorrt_layer_kind_runs_or_has_a_stated_reason():
    """Issue 11: each member of trt.LayerType has a reference function, or is a kind that
    cannot run on one device without a plugin (its error says why; tested in
    test_attention_layers.py)."""
    from torch_trt_ref._trt import trt
    from torch_trt_ref.runtime.reference.layers.attention_ops import UNRUNNABLE_KINDS

    kinds = set(trt.LayerType.__members__)
    missing = sorted(kinds - set(REFERENCE_LAYERS) - set(UNRUNNABLE_KINDS))
    assert not missing, f"TensorRT layer kinds with neither a reference nor a reason: {missing}"
