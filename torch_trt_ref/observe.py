"""The hooks a debugging tool listens on (``debug.Debugger``): the compiler, the lowering
pipeline and the reference executor call the current observer, if one is set, at the
points it may record. Plain data, so every layer may call it; nothing here imports the
tools that listen."""

from __future__ import annotations

import contextlib
import contextvars
from typing import Any, Iterator, Protocol


class Observer(Protocol):
    """What a listener implements; each hook is called only while it is current."""

    times_layers: bool  # the reference executor times each layer (eager replay only)

    def compile_started(self) -> None: ...

    def lowering_pass(self, name: str, when: str, gm: Any) -> None: ...  # "before"/"after"

    def engine_built(self, name: str, engine: Any) -> None: ...

    def layer_timed(self, engine: str, layer: str, kind: str, seconds: float) -> None: ...


_CURRENT: contextvars.ContextVar[Observer | None] = contextvars.ContextVar(
    "torch_trt_ref_observer", default=None)


def current() -> Observer | None:
    return _CURRENT.get()


@contextlib.contextmanager
def observing(observer: Observer) -> Iterator[None]:
    token = _CURRENT.set(observer)
    try:
        yield
    finally:
        _CURRENT.reset(token)
