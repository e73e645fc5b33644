"""Re-propagation of node metadata (FakeTensor ``val``) after passes that change dtypes."""

from __future__ import annotations

from torch.fx import GraphModule
from torch.fx.passes.fake_tensor_prop import FakeTensorProp


def propagate_meta(gm: GraphModule) -> GraphModule:
    """Recompute ``meta['val']`` of every node with the capture's fake mode, so symbolic
    shapes stay those of torch.export."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    fakes = [n.meta["val"] for n in placeholders]
    mode = next((f.fake_mode for f in fakes if hasattr(f, "fake_mode")), None)
    if mode is None:
        from torch._subclasses.fake_tensor import FakeTensorMode

        mode = FakeTensorMode(allow_non_fake_inputs=True)
    previous = mode.allow_non_fake_inputs
    mode.allow_non_fake_inputs = True
    try:
        FakeTensorProp(gm, mode).propagate_dont_convert_inputs(*fakes)
    finally:
        mode.allow_non_fake_inputs = previous
    return gm
