"""Registration of the partition strategies by name (``settings.partitioner``)."""

from __future__ import annotations

from .driver import register_strategy
from .fast import fast_segments


@register_strategy("fast")
def fast(gm, supported, settings):
    return fast_segments(gm, supported)
