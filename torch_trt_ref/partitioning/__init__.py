"""Partitioning: capability check, strategies, the shared result type and stitching."""

from .capability import check_node, get_graph_converter_support, support_report  # noqa: F401
from .driver import STRATEGIES, UnsupportedOperatorError, partition  # noqa: F401
from .result import TENSORRT, TORCH, PartitionResult, Segment  # noqa: F401
from .stitch import stitch  # noqa: F401
