"""The dashboard's figures, drawn with matplotlib's object API (no pyplot state) and returned as
base64 PNG for inline <img> tags: a suite's geomean trend and one small multiple per series."""

from __future__ import annotations

import base64
import io
import math

from matplotlib.figure import Figure

from . import noise, steps, store
from .suites import COLD_CANARY, is_canary

# The overview's lines: (label, series type, which names). Whole-compile totals apart from the
# phases and micro-benchmarks, so a phase does not count twice in the compile line.
CATEGORIES = [
    ("compile CPU (totals)", "cpu", lambda n: n.endswith("/total")),
    ("CPU: phases, micro-benchmarks", "cpu", lambda n: not n.endswith("/total")),
    ("peak RSS", "rss", lambda n: True),
    ("latency", "latency", lambda n: True),
    ("accuracy passes", "accuracy", lambda n: True),  # wall time: in its small multiples
    # the count tier: bytecodes of our code, per compile (totals) and per family pass
    ("count tier: bytecodes", "work", lambda n: n.endswith(("/ops/total", "/ops")))]
BAND = 2  # the shaded band is baseline x exp(+-BAND x spread)
COLORS = {"cpu": "#1f77b4", "rss": "#2ca02c", "latency": "#9467bd", "accuracy": "#8c564b",
          "wall": "#7f7f7f", "canary": "#d62728"}
LINE_COLORS = ["#1f77b4", "#17becf", "#2ca02c", "#9467bd", "#8c564b", "#ff7f0e"]


def png(fig: Figure) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=fig.dpi, bbox_inches="tight")
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _commit_ticks(ax, runs: list[store.Run], most: int = 12) -> None:
    every = max(1, math.ceil(len(runs) / most))
    ticks = list(range(0, len(runs), every))
    ax.set_xticks(ticks)
    ax.set_xticklabels([runs[i].commit[:7] for i in ticks], rotation=60, fontsize=6,
                       family="monospace")


def geomean_ratios(runs: list[store.Run], kind: str, baselines: dict[str, float],
                   names=lambda n: True) -> list:
    """Per run, the geometric mean over its ``kind`` series (those ``names`` accepts) of
    statistic / baseline (None where the run has none of them)."""
    out = []
    for run in runs:
        logs = [math.log(s.statistic() / baselines[n]) for n, s in run.series.items()
                if s.type == kind and names(n) and n in baselines and baselines[n] > 0
                and s.statistic() > 0 and not is_canary(n)]
        out.append(math.exp(sum(logs) / len(logs)) if logs else None)
    return out


def overview(runs: list[store.Run], baselines: dict[str, float], title: str) -> str:
    """One panel: per category the geomean ratio to baseline over the suite's runs, loaded runs
    hollow, each canary (machine speed: the loop dashed, the cold export dotted)."""
    fig = Figure(figsize=(9, 3.2), dpi=90)
    draw_overview(fig.add_subplot(), runs, baselines, title)
    return png(fig)


def glance(panels: list[tuple], opened: list[str], path) -> None:
    """The dashboard at a glance (docs/img/perf_history.png): the open regressions, then per
    suite its trend (``panels``: (runs, baselines, title, band, steps at run indices)) with
    the noise band of its time series and its change points (red: open, grey: other)."""
    shown = opened[:10] + ([f"... and {len(opened) - 10} more"] if len(opened) > 10 else [])
    fig = Figure(figsize=(11, 1.0 + 0.17 * max(1, len(shown)) + 3.4 * len(panels)), dpi=90)
    top = 1 - (0.35 + 0.17 * max(1, len(shown))) / fig.get_figheight()
    fig.text(0.01, 0.995, f"Open regressions ({len(opened)})", va="top", fontsize=11,
             weight="bold")
    fig.text(0.01, 0.995 - 0.3 / fig.get_figheight(), "\n".join(shown) or "none", va="top",
             fontsize=7, family="monospace")
    for k, (runs, baselines, title, band, marks) in enumerate(panels):
        height = (top - 0.04) / len(panels)
        ax = fig.add_axes([0.06, top - (k + 1) * height + 0.09, 0.72, height - 0.13])
        draw_overview(ax, runs, baselines, title)
        ax.axhspan(math.exp(-BAND * band), math.exp(BAND * band), color="#1f77b4", alpha=0.1,
                   lw=0, label=f"noise band (+-{BAND} median spreads)")
        for index, is_open in marks:
            ax.axvline(index - 0.5, color="#d62728" if is_open else "#bbbbbb", lw=0.8, ls="--")
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.savefig(path, dpi=fig.dpi)


def draw_overview(ax, runs: list[store.Run], baselines: dict[str, float], title: str) -> None:
    for (label, kind, names), color in zip(CATEGORIES, LINE_COLORS):
        ys = geomean_ratios(runs, kind, baselines, names)
        xs = [i for i, y in enumerate(ys) if y is not None]
        if not xs:
            continue
        quiet = [i for i in xs if not runs[i].loaded or kind in store.LOAD_FREE_TYPES]
        ax.plot(quiet, [ys[i] for i in quiet], "-", color=color, lw=1.2, label=label)
        ax.scatter(xs, [ys[i] for i in xs], s=14, color=color,
                   facecolors=["none" if runs[i].loaded else color for i in xs])
    canaries = sorted({n for r in runs for n in r.series if is_canary(n) and baselines.get(n)})
    for name in canaries:  # one line each: the loop dashed, the cold canary dotted
        style = ":" if name == COLD_CANARY else "--"
        points = [(i, r.series[name].statistic() / baselines[name]) for i, r in enumerate(runs)
                  if name in r.series and not r.loaded]
        if points:
            ax.plot(*zip(*points), style, color=COLORS["canary"], lw=1, label=name)
    ax.axhline(1.0, color="black", lw=0.6)
    ax.set_ylabel("ratio to baseline (geomean)")
    ax.set_title(title, fontsize=10)
    _commit_ticks(ax, runs)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.grid(alpha=0.3)


def small_multiple(name: str, runs: list[store.Run], found: list[steps.Step],
                   spread: noise.Spread | None, baseline: float | None) -> str:
    """One series: raw samples (dots), the run statistic (line; loaded runs hollow), the noise
    band over the current segment, change points (red: open regression, green: annotated,
    grey: other) and commit labels."""
    fig = Figure(figsize=(3.6, 2.2), dpi=80)
    ax = fig.add_subplot()
    held = [(i, r) for i, r in enumerate(runs) if name in r.series]
    kind = held[0][1].series[name].type
    color = COLORS.get(kind, "black")
    for i, r in held:
        ax.scatter([i] * len(r.series[name].samples), r.series[name].samples, s=4,
                   color="#bbbbbb", zorder=1)
    xs = [i for i, _ in held]
    ys = [r.series[name].statistic() for _, r in held]
    ax.plot([x for x, (_, r) in zip(xs, held) if not r.loaded],
            [y for y, (_, r) in zip(ys, held) if not r.loaded], "-", color=color, lw=1, zorder=2)
    ax.scatter(xs, ys, s=10, color=color, zorder=3,
               facecolors=["none" if r.loaded else color for _, r in held])
    # steps index the points store.series_points keeps: non-loaded ones (and every count)
    quiet = [i for i, r in held if not r.loaded or kind in store.LOAD_FREE_TYPES]
    if spread is not None and baseline and kind in store.NOISY_TYPES:
        start = quiet[found[-1].index] if found else (quiet[0] if quiet else 0)
        lo, hi = baseline * math.exp(-BAND * spread.value), baseline * math.exp(BAND * spread.value)
        ax.fill_between([start, len(runs) - 1], lo, hi, color=color, alpha=0.12, lw=0)
        ax.hlines(baseline, start, len(runs) - 1, color=color, lw=0.6, ls=":")
    for s in found:
        c = "#d62728" if s.open_regression else ("#2ca02c" if s.annotation else "#999999")
        ax.axvline(quiet[s.index] - 0.5, color=c, lw=1.2, ls="--")
    ax.set_xlim(-0.5, len(runs) - 0.5)
    _commit_ticks(ax, runs, most=8)
    ax.tick_params(axis="y", labelsize=6)
    ax.set_ylabel(held[0][1].series[name].unit, fontsize=7)
    ax.grid(alpha=0.3)
    return png(fig)
