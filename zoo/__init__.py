"""Model zoo: a registry of real models with random weights, a harness that compiles each
over strategies x precisions, and reports / regression comparison of the results.

``zoo.get``, ``zoo.ZOO`` and ``zoo.ZooEntry`` load the registry (torch, torchvision,
transformers) on first use, so tools that only read zoo records (``zoo.schema``, the perf
history commands) start without them."""

__all__ = ["ZOO", "ZooEntry", "get"]


def __getattr__(name: str):
    if name == "ZooEntry":
        from .entry import ZooEntry

        return ZooEntry
    if name in ("ZOO", "get"):
        from . import registry

        return getattr(registry, name)
    raise AttributeError(f"module 'zoo' has no attribute {name!r}")
