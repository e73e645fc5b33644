"""The prepared replay compiled by inductor (issue 42): one engine's list of calls
(``replay._Prepared``) traced by ``torch.compile`` and generated as fused kernels, as
TensorRT's builder fuses a layer's elementwise tail into its producer. Chosen per program
by its graph settings' ``replay`` ("plain", the default, or "inductor"; Note [Graph
settings] in cuda_graphs.py).

Note [Compiled replay]: the plain replay stays the oracle and the first, checked call of
every input signature (each layer's output against TensorRT's inferred shape and dtype).
That call then compiles the replay for the signature and runs it once, outside any CUDA
graph capture, so the kernels are built and tuned before a graph records them; from the
next call (or the capture that follows) the compiled replay runs. Dynamo traces the
replay's Python: a layer whose result decides host control flow gives a graph break, not a
silently specialized graph. Each engine's replay is its own function object with its own
code object, so the engines of a program (and of several programs) don't share dynamo's
per-code cache and its recompile limit. Where compiling fails (no C++ compiler for CPU
code, no Triton for the GPU, an op inductor cannot lower) the engine keeps the plain
replay for that signature, with one warning naming why. The compiled replay reorders and
fuses floating-point arithmetic: its outputs differ from the plain replay's by rounding,
within the float64 rule (tests hold the two together)."""

from __future__ import annotations

import types
import warnings
from typing import Callable

import torch

from ...settings import REPLAYS  # noqa: F401  (the modes, named here for readers)

BACKEND = "inductor"  # torch.compile's backend for the "inductor" replay (tests: lighter)


def _own_function(fn: Callable, name: str) -> Callable:
    """``fn`` (a closure) as a new function with its own code object (Note [Compiled
    replay]: dynamo caches compiled frames per code object)."""
    code = fn.__code__.replace(co_name=name, co_qualname=name)
    return types.FunctionType(code, fn.__globals__, name, fn.__defaults__, fn.__closure__)


class CompiledReplay:
    """One engine's compiled replays, one per input signature (None: compiling failed,
    the plain replay runs)."""

    def __init__(self, prepared, name: str, backend: str | Callable | None = None):
        backend = BACKEND if backend is None else backend
        self.prepared, self.name, self.backend = prepared, name, backend
        self.compiled: dict[tuple, Callable | None] = {}
        self.warned = False

        def replay(*inputs):
            return tuple(prepared.run(list(inputs), False))

        self.fn = torch.compile(_own_function(replay, f"replay_{id(self):x}"),
                                backend=backend, dynamic=False)

    def prepare(self, inputs: list[torch.Tensor], signature: tuple) -> None:
        """Compile the replay for ``signature`` and run it once (outside any capture)."""
        if signature in self.compiled:
            return
        try:
            self.fn(*inputs)
            self.compiled[signature] = self.fn
        except Exception as err:  # no compiler, an op inductor cannot lower: plain replay
            self.compiled[signature] = None
            if not self.warned:
                # dynamo wraps the backend's own error (BackendCompilerFailed.inner_exception)
                while getattr(err, "inner_exception", None) or err.__cause__:
                    err = getattr(err, "inner_exception", None) or err.__cause__
                first = str(err).strip().splitlines()[0][:300] if str(err).strip() else ""
                backend = getattr(self.backend, "__name__", self.backend)
                warnings.warn(f"{self.name}: compiling the replay with {backend} failed "
                              f"({type(err).__name__}: {first}); the plain replay runs for "
                              "these input shapes", stacklevel=4)
                self.warned = True

    def __call__(self, inputs: list[torch.Tensor], signature: tuple) -> list | None:
        """The compiled replay's outputs, or None where there is none for ``signature``."""
        fn = self.compiled.get(signature)
        return None if fn is None else list(fn(*inputs))
