"""Peak resident memory of this process, sampled by a background thread (psutil)."""

from __future__ import annotations

import threading
import time

import psutil


class PeakRSS:
    """Context manager recording the peak RSS above the RSS at entry, in bytes."""

    def __init__(self, interval: float = 0.005):
        self.interval = interval
        self.baseline = 0
        self.peak = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._process = psutil.Process()

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self._process.memory_info().rss)
            time.sleep(self.interval)

    def __enter__(self) -> "PeakRSS":
        self.baseline = self.peak = self._process.memory_info().rss
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.peak = max(self.peak, self._process.memory_info().rss)

    @property
    def above_baseline(self) -> int:
        return max(0, self.peak - self.baseline)
