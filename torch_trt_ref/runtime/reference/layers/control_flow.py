"""Reference semantics of TensorRT's control-flow layers: loops (TRIP_LIMIT, RECURRENCE,
ITERATOR, LOOP_OUTPUT) and conditionals (CONDITION, CONDITIONAL_INPUT,
CONDITIONAL_OUTPUT)."""

from __future__ import annotations
