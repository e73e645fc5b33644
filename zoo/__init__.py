"""Model zoo: a registry of real models with random weights, a harness that compiles each
over strategies x precisions, and reports / regression comparison of the results."""

from .entry import ZooEntry  # noqa: F401
from .registry import ZOO, get  # noqa: F401

__all__ = ["ZOO", "ZooEntry", "get"]
