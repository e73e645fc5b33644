"""The op-level conformance suite: every converter checked against eager PyTorch."""
