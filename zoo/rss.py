"""Peak RSS per compile phase: ``torch_trt_ref.memory.PeakRSS`` that also keeps its samples,
so the peak can be attributed to capture, lowering, partition or conversion + build."""

from __future__ import annotations

import time

from torch_trt_ref.memory import PeakRSS


class PhaseRSS(PeakRSS):
    """PeakRSS keeping (time, rss) samples; ``peak_by_phase`` splits them by phase."""

    def __init__(self, interval: float = 0.005):
        super().__init__(interval)
        self.samples: list[tuple[float, int]] = []
        self.start = 0.0

    def __enter__(self) -> "PhaseRSS":
        self.start = time.perf_counter()
        super().__enter__()
        return self

    def _sample(self) -> None:
        while not self._stop.is_set():
            rss = self._process.memory_info().rss
            self.samples.append((time.perf_counter(), rss))
            self.peak = max(self.peak, rss)
            time.sleep(self.interval)

    def peak_by_phase(self, phases: dict[str, float]) -> dict[str, int]:
        """Peak RSS above baseline within each phase window. capture, lowering and partition
        run back to back from the start; conversion and build alternate per engine after
        them, so they share the window that ends with the compile."""
        bounds, t = [], self.start
        for name in ("capture", "lowering", "partition"):
            bounds.append((name, t, t + phases.get(name, 0.0)))
            t += phases.get(name, 0.0)
        bounds.append(("conversion+build", t, float("inf")))
        out = {}
        for name, lo, hi in bounds:
            inside = [rss for ts, rss in self.samples if lo <= ts < hi]
            out[name] = max(0, max(inside, default=self.baseline) - self.baseline)
        return out
