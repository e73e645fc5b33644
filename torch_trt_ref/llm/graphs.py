"""Decode steps replayed from one CUDA graph (``generate(..., cuda_graph=True)``).

Note [Decode graph]: the runtime's own graph replay (runtime/cuda_graphs.py) copies inputs
into buffers of its own, so the engine would write those, not the caller's KV cache; it is
off for a compiled decoder. A ``DecodeGraph`` is bound to one cache instead: it captures
the decode step (one token) with the caller's cache buffers themselves as the engine's
inputs, and two small buffers of its own for the token and the position. Each call copies
the token and the position into those, replays, and returns the graph's logits buffer
(valid until the next call). The engine writes the cache in place (Note [in-place cache]
in the reference executor), so the replay writes the caller's buffers at the position of
the call. The capture happens at the first call, after one uncaptured run of that same step
on a side stream (its checks run there; the replay then writes the same K/V again).

The two-profile engine's network has dynamic shapes, computed at run time (SHAPE layers make
device tensors from host values, SHUFFLE and SLICE read their shape inputs back), which a
capture forbids. So the step runs in ``shapes_resolved()`` (Note [Shapes resolved before
capture], runtime/reference/resolved.py): its first, uncaptured run at the decode signature
keeps the shape values (149 of the 524 calls a 2-layer Llama replays) and every later run, the
captured one included, replays the other layers over them. (Checked on a CPU with a
stand-in capture, tests/test_llm.py; the real capture failed once on an H200, and the fix of
that read is not yet run on a GPU: docs/llm.md.)
A decoder compiled with ``max_prompt_len=1`` has static shapes only (259 layers for the same Llama)
and the same cache shapes, so ``generate(compiled, ids, cuda_graph=DecodeGraph(decode_only,
cache))`` runs the prefill on ``compiled`` and replays the decode steps of ``decode_only``
over the one cache (a second engine holding the same weights): measured on an H200
(docs/llm.md), before the resolved replay existed."""

from __future__ import annotations

from typing import Callable

import torch

from ..runtime.reference.resolved import shapes_resolved
from .compiled import CompiledDecoder


def cuda_capture(fn: Callable[[], torch.Tensor]) -> Callable[[], torch.Tensor]:
    """``fn`` run once on a side stream, then captured as a CUDA graph; returns its replay
    (which returns the captured output buffer)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn()

    def replay() -> torch.Tensor:
        graph.replay()
        return out

    return replay


class DecodeGraph:
    """Decode steps of ``compiled`` over ``cache`` (Note [Decode graph]); ``capture`` makes
    the replay from the step (default ``cuda_capture``; tests pass a stand-in)."""

    def __init__(self, compiled: CompiledDecoder, cache: list[torch.Tensor],
                 capture: Callable | None = None):
        device = cache[0].device
        if capture is None and device.type != "cuda":
            raise ValueError(f"a CUDA graph needs the cache on a CUDA device; it is on "
                             f"{device} (compiled.new_cache('cuda'), after "
                             f"compiled.to('cuda'))")
        self.compiled, self.cache = compiled, cache
        self.capture = capture or cuda_capture
        self.ids = torch.zeros(compiled.batch_size, 1, dtype=torch.long, device=device)
        self.position = torch.zeros(1, dtype=torch.long, device=device)
        self.replay: Callable[[], torch.Tensor] | None = None
        self.calls = 0

    def _step(self) -> torch.Tensor:
        with shapes_resolved():  # (a no-op for a static-shape network)
            return self.compiled.module(self.ids, self.position, *self.cache)[0]

    def __call__(self, token: torch.Tensor, position: int) -> torch.Tensor:
        """The logits after ``token`` [batch, 1] at ``position`` (the graph's buffer)."""
        self.compiled.check_positions(position, 1)
        self.ids.copy_(token.reshape(self.ids.shape))
        self.position.fill_(position)
        if self.replay is None:
            self.replay = self.capture(self._step)
        self.calls += 1
        return self.replay()
