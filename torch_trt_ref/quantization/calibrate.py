"""Calibrators: collect what a quantizer sees over the calibration batches and pick its
``amax``: max, percentile (of a histogram of |x|) or entropy (TensorRT's KL-divergence
search over the same histogram). Each counts the non-finite values (NaN, inf) it saw in
``nonfinite``: the max of such a batch is not finite (``quantize`` raises), the histograms
leave them out (``quantize`` warns)."""

from __future__ import annotations

import torch

ALGORITHMS = ("max", "percentile", "entropy")
BINS = 2048


class MaxCalibrator:
    """amax = the largest |x| seen; per-channel along ``axis`` (reduced over the others)."""

    def __init__(self, axis: int | None = None):
        self.axis, self.amax, self.nonfinite = axis, None, 0

    def collect(self, x: torch.Tensor) -> None:
        a = x.detach().abs().float()
        self.nonfinite += nonfinite(a)
        if self.axis is None:
            m = a.amax() if a.numel() else torch.zeros(())
        else:
            dims = [d for d in range(a.dim()) if d != self.axis % a.dim()]
            m = a.amax(dim=dims, keepdim=True)
        self.amax = m if self.amax is None else torch.maximum(self.amax, m)

    def compute(self) -> torch.Tensor | None:
        return self.amax


class HistogramCalibrator:
    """A histogram of |x| over [0, bins * width]; the width is set by the first batch and the
    range grows by whole bins when a later batch exceeds it (ModelOpt's HistogramCalibrator
    does the same). ``compute`` applies the percentile or the entropy rule."""

    def __init__(self, algorithm: str, percentile: float = 99.99, levels: int = 128):
        self.algorithm, self.percentile, self.levels = algorithm, percentile, levels
        self.hist, self.width, self.nonfinite = None, None, 0

    def collect(self, x: torch.Tensor) -> None:
        a = x.detach().abs().float().flatten()
        bad = nonfinite(a)
        if bad:  # left out of the histogram, counted
            self.nonfinite += bad
            a = a[a.isfinite()]
        if not a.numel():
            return
        top = float(a.max())
        if self.width is None:
            self.width = max(top, torch.finfo(torch.float32).tiny) / BINS
            self.hist = torch.zeros(BINS, dtype=torch.float64)
        bins = max(len(self.hist), int(top / self.width) + 1)
        if bins > len(self.hist):
            self.hist = torch.cat([self.hist, self.hist.new_zeros(bins - len(self.hist))])
        self.hist += torch.histc(a, bins, 0, bins * self.width).double()

    def compute(self) -> torch.Tensor | None:
        if self.hist is None:
            return None
        if self.algorithm == "percentile":
            cdf = self.hist.cumsum(0) / self.hist.sum()
            index = int(torch.searchsorted(cdf, self.percentile / 100.0).clamp(max=len(cdf) - 1))
            return torch.tensor((index + 1) * self.width)
        return torch.tensor(entropy_threshold(self.hist, self.levels) * self.width)


def nonfinite(a: torch.Tensor) -> int:
    """How many elements of ``a`` are NaN or infinite."""
    return 0 if bool(a.isfinite().all()) else int((~a.isfinite()).sum())


def _kl(p: torch.Tensor, q: torch.Tensor) -> float:
    p, q = p / p.sum(), q / q.sum()
    keep = p > 0
    return float((p[keep] * (p[keep] / q[keep].clamp(min=1e-12)).log()).sum())


def entropy_threshold(hist: torch.Tensor, levels: int = 128, stride: int = 16) -> int:
    """TensorRT's entropy calibration: for each candidate number of bins i, the reference
    distribution is hist[:i] with the outliers folded into its last bin, the candidate is it
    squeezed into ``levels`` quantization levels and expanded back over the non-empty bins;
    the i of least KL divergence (reference || candidate) sets amax = i bins."""
    best, best_i = float("inf"), len(hist)
    for i in range(levels, len(hist) + 1, stride):
        ref = hist[:i].clone()
        ref[-1] += hist[i:].sum()
        if ref.sum() == 0:
            continue
        chunks = torch.tensor_split(hist[:i], levels)
        cand = torch.cat([torch.where(c > 0, c.sum() / (c > 0).sum().clamp(min=1), 0.0)
                          for c in chunks])
        divergence = _kl(ref, cand)
        if divergence < best:
            best, best_i = divergence, i
    return best_i


def make(algorithm: str, axis: int | None, percentile: float, weight: bool = False):
    """The calibrator for an activation quantizer (``algorithm``) or a weight one (max, per
    tensor too: a weight's amax is its max whatever the activations' algorithm)."""
    if algorithm == "max" or axis is not None or weight:
        return MaxCalibrator(axis)
    return HistogramCalibrator(algorithm, percentile)
