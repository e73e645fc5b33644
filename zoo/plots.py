"""matplotlib figures of a sweep: segments by strategy, compile-time breakdown, peak memory
and latency by precision. Each function returns PNG bytes (or None when there is no data)."""

from __future__ import annotations

import io
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from torch_trt_ref.report import PHASES  # noqa: E402
from torch_trt_ref.settings import COMPILE_PRECISIONS, PARTITIONERS  # noqa: E402

MiB = 2**20


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return buf.getvalue()


def _ok(records, precision=None, rp=False):
    return [r for r in records if r.get("status") == "ok" and "partition" in r
            and r["cell"]["resource_partitioning"] == rp
            and (precision is None or r["cell"]["precision"] == precision)]


def _grouped_bars(ax, models, series: dict[str, dict[str, float]], ylabel: str, log=False):
    width = 0.8 / max(1, len(series))
    for i, (label, values) in enumerate(series.items()):
        xs = [m + (i - (len(series) - 1) / 2) * width for m in range(len(models))]
        ax.bar(xs, [values.get(name, 0) for name in models], width, label=label)
    ax.set_xticks(range(len(models)))
    ax.set_xticklabels(models, rotation=30, ha="right")
    ax.set_ylabel(ylabel)
    if log:
        ax.set_yscale("log")
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)


def segments_by_strategy(records) -> bytes | None:
    rows = _ok(records, "fp32")
    if not rows:
        return None
    models = sorted({r["cell"]["model"] for r in rows})
    engines, torch_segs = defaultdict(dict), defaultdict(dict)
    for r in rows:
        s, m = r["cell"]["strategy"], r["cell"]["model"]
        engines[s][m] = r["partition"]["engines"]
        torch_segs[s][m] = r["partition"]["torch_segments"]
    order = [s for s in PARTITIONERS if s in engines]
    fig, axes = plt.subplots(2, 1, figsize=(max(7, 0.9 * len(models) + 3), 7), sharex=True)
    _grouped_bars(axes[0], models, {s: engines[s] for s in order}, "TensorRT engines")
    _grouped_bars(axes[1], models, {s: torch_segs[s] for s in order}, "PyTorch segments")
    for ax in axes:  # counts: whole-number ticks only
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    axes[0].set_title("Segments by partition strategy (fp32)")
    return _png(fig)


def compile_breakdown(records) -> bytes | None:
    rows = {r["cell"]["model"]: r for r in _ok(records, "fp32")
            if r["cell"]["strategy"] == "fast"} or {
        r["cell"]["model"]: r for r in _ok(records, "fp32")}
    if not rows:
        return None
    models = sorted(rows)
    fig, ax = plt.subplots(figsize=(9.5, 0.45 * len(models) + 1.8))
    left = [0.0] * len(models)
    for phase in PHASES:
        values = [rows[m]["phases"].get(phase, 0.0) for m in models]
        ax.barh(models, values, left=left, label=phase)
        left = [a + b for a, b in zip(left, values)]
    ax.set_xlabel("seconds")
    ax.set_title("Compile time by phase (fp32)")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.grid(axis="x", alpha=0.3)
    ax.invert_yaxis()
    return _png(fig)


def peak_memory(records) -> bytes | None:
    rows = _ok(records, "fp32")
    rp_rows = _ok(records, "fp32", rp=True)
    if not rows and not rp_rows:
        return None
    series: dict[str, dict[str, float]] = {"fp32 weights": {}, "peak RSS": {}}
    for r in rows + rp_rows:
        series["fp32 weights"][r["cell"]["model"]] = r["memory"]["weight_bytes"] / MiB
    for r in rows:
        m = r["cell"]["model"]
        series["peak RSS"][m] = max(series["peak RSS"].get(m, 0),
                                    r["memory"]["peak_rss_bytes"] / MiB)
    if rp_rows:
        series["peak RSS, resource partitioning"] = {}
        for r in rp_rows:
            m = r["cell"]["model"]
            prev = series["peak RSS, resource partitioning"].get(m, 0)
            series["peak RSS, resource partitioning"][m] = max(
                prev, r["memory"]["peak_rss_bytes"] / MiB)
    models = sorted(series["fp32 weights"])
    fig, ax = plt.subplots(figsize=(max(9, 0.9 * len(models) + 5), 4.5))
    _grouped_bars(ax, models, series, "MiB (log scale)", log=True)
    targets = [2 * series["fp32 weights"][m] for m in models]
    ax.scatter(range(len(models)), targets, marker="_", s=900, color="black", zorder=3,
               label="target: 2x fp32 weights")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_title("Peak compile RSS above baseline vs fp32 weights (worst strategy)")
    return _png(fig)


def latency_by_precision(records) -> bytes | None:
    rows = [r for r in records if r.get("latency") and not r["cell"]["resource_partitioning"]]
    if not rows:
        return None
    series: dict[str, dict[str, float]] = defaultdict(dict)
    for r in rows:
        m, p = r["cell"]["model"], r["cell"]["precision"]
        if r["cell"]["strategy"] == "fast" or m not in series[p]:
            series[p][m] = r["latency"]["median_s"] * 1e3
        series["eager fp32"][m] = r["eager_latency"]["median_s"] * 1e3
    models = sorted({m for values in series.values() for m in values})
    order = {k: series[k] for k in ["eager fp32", *COMPILE_PRECISIONS] if k in series}
    executors = sorted({r["latency"]["executor"] for r in rows})
    fig, ax = plt.subplots(figsize=(max(7, 0.9 * len(models) + 3), 4.5))
    _grouped_bars(ax, models, order, "median latency, ms (log scale)", log=True)
    ax.set_title(f"Latency by precision (executor: {', '.join(executors)})", fontsize=10)
    return _png(fig)


FIGURES = {"segments_by_strategy": segments_by_strategy, "compile_breakdown": compile_breakdown,
           "peak_memory": peak_memory, "latency_by_precision": latency_by_precision}
