"""Partitioning: capability check, strategies, the shared result type and stitching."""

from .atomic import register_atomic_subgraph  # noqa: F401
from .capability import (  # noqa: F401
    SupportReport,
    check_node,
    check_nodes,
    get_graph_converter_support,
    support_report,
)
from .driver import STRATEGIES, UnsupportedOperatorError, partition  # noqa: F401
from .hierarchical import wrap_backend_segment  # noqa: F401
from .result import TENSORRT, TORCH, PartitionResult, Segment  # noqa: F401
from .stitch import stitch  # noqa: F401
