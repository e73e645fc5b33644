"""Regression tracking: compare two sweeps cell by cell. Counts are exact (any worsening, or
any change of a count with no better direction, fails); time and memory fail when the
new/base ratio passes a threshold."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

EXACT, RATIO = "exact", "ratio"
REGRESSED, IMPROVED, CHANGED, SAME = "REGRESSED", "improved", "changed", "same"
MISSING, NEW = "MISSING", "new"


@dataclass(frozen=True)
class Metric:
    name: str
    path: tuple[str, ...]
    kind: str  # EXACT: any change counts; RATIO: judged by new/base against a threshold
    group: str  # "counts", "time" or "memory"
    better: str | None = None  # "lower" / "higher" when a change has a good direction
    alias: tuple[str, ...] = ()  # where version-1 records kept the value

    def get(self, record: dict[str, Any]) -> Any:
        for path in (self.path, self.alias) if self.alias else (self.path,):
            value: Any = record
            for part in path:
                if not isinstance(value, dict) or part not in value:
                    value = None
                    break
                value = value[part]
            if value is not None:
                return value
        return None


TRACKED = (
    Metric("engines", ("partition", "engines"), EXACT, "counts"),
    Metric("torch_segments", ("partition", "torch_segments"), EXACT, "counts", "lower"),
    Metric("transitions", ("partition", "transitions"), EXACT, "counts", "lower"),
    Metric("supported_ops", ("ops", "supported"), EXACT, "counts", "higher"),
    Metric("total_ops", ("ops", "total"), EXACT, "counts"),
    # the float64 rule's verdict: a cell accurate in the baseline and not now REGRESSED
    Metric("accuracy_passed", ("accuracy", "passed"), EXACT, "counts", "higher",
           ("accuracy", "within_tolerance")),
    # decoder-LLM cells (zoo/llm_cells.py; their latencies, in ms over few tokens, are not
    # compared)
    Metric("llm_engines", ("llm", "engines"), EXACT, "counts"),
    Metric("llm_profiles", ("llm", "profiles"), EXACT, "counts"),
    Metric("llm_cache_bytes", ("llm", "cache_bytes"), EXACT, "counts"),
    Metric("llm_in_place", ("llm", "in_place"), EXACT, "counts", "higher"),
    Metric("llm_tokens_equal", ("llm", "tokens_equal_to_transformers"), EXACT, "counts",
           "higher"),
    Metric("outside_builder_s", ("outside_builder_seconds",), RATIO, "time", "lower"),
    Metric("build_s", ("phases", "build"), RATIO, "time", "lower"),
    Metric("latency_median_s", ("latency", "median_s"), RATIO, "time", "lower"),
    Metric("peak_rss_bytes", ("memory", "peak_rss_bytes"), RATIO, "memory", "lower"),
    Metric("plan_bytes", ("engines", "plan_bytes"), RATIO, "memory", "lower"),
)


@dataclass(frozen=True)
class Thresholds:
    """Ratio new/base above which time or memory regresses, and absolute floors below which
    a difference is noise (a 10 ms phase may double without meaning anything)."""

    time: float = 1.5
    memory: float = 1.3
    min_seconds: float = 0.25
    min_bytes: int = 16 * 2**20


@dataclass(frozen=True)
class Delta:
    key: str
    metric: str
    base: Any
    new: Any
    verdict: str

    @property
    def fails(self) -> bool:
        return self.verdict in (REGRESSED, CHANGED, MISSING)


def _ratio_verdict(metric: Metric, base: float, new: float, th: Thresholds) -> str:
    floor = th.min_seconds if metric.group == "time" else th.min_bytes
    limit = th.time if metric.group == "time" else th.memory
    if max(base, new) < floor or base == new:
        return SAME
    if base <= 0:
        return REGRESSED if new > floor else SAME
    ratio = new / base
    if ratio > limit:
        return REGRESSED
    if ratio < 1 / limit:
        return IMPROVED
    return SAME


def _exact_verdict(metric: Metric, base: Any, new: Any, strict: bool) -> str:
    if base == new:
        return SAME
    if metric.better is None:
        return CHANGED
    improved = new < base if metric.better == "lower" else new > base
    if not improved:
        return REGRESSED
    return CHANGED if strict else IMPROVED


def compare_cell(key: str, base: dict, new: dict, thresholds: Thresholds = Thresholds(),
                 counts_only: bool = False, strict: bool = False) -> list[Delta]:
    """The deltas of one cell measured twice. A cell that compiled before and fails now is a
    regression; one that failed before and compiles now is an improvement."""
    base_ok, new_ok = base.get("status") == "ok", new.get("status") == "ok"
    deltas = [Delta(key, "status", base.get("status"), new.get("status"),
                    SAME if base_ok == new_ok else (IMPROVED if new_ok else REGRESSED))]
    if not (base_ok and new_ok):
        return deltas
    for metric in TRACKED:
        if counts_only and metric.group != "counts":
            continue
        b, n = metric.get(base), metric.get(new)
        if b is None or n is None:
            continue
        if metric.kind == EXACT:
            verdict = _exact_verdict(metric, b, n, strict)
        else:
            verdict = _ratio_verdict(metric, float(b), float(n), thresholds)
        deltas.append(Delta(key, metric.name, b, n, verdict))
    return deltas


def index(records: Iterable[dict]) -> dict[str, dict]:
    """Records by cell key; when a key repeats, the last record wins (a re-run cell)."""
    return {r["cell"]["key"]: r for r in records}


def compare(base: Iterable[dict], new: Iterable[dict], thresholds: Thresholds = Thresholds(),
            counts_only: bool = False, strict: bool = False) -> list[Delta]:
    """Deltas of every cell of ``base`` and ``new``. A baseline cell absent from the new
    sweep is MISSING (fails); a cell only in the new sweep is reported as new."""
    b, n = index(base), index(new)
    deltas: list[Delta] = []
    for key in b:
        if key not in n:
            deltas.append(Delta(key, "cell", "present", "absent", MISSING))
        else:
            deltas += compare_cell(key, b[key], n[key], thresholds, counts_only, strict)
    deltas += [Delta(key, "cell", "absent", "present", NEW) for key in n if key not in b]
    return deltas


def _fmt(value: Any, metric: str) -> str:
    if isinstance(value, float):
        if metric.endswith("_bytes"):
            return f"{value / 2**20:.1f} MiB"
        return f"{value:.3g}"
    if isinstance(value, int) and metric.endswith("_bytes"):
        return f"{value / 2**20:.1f} MiB"
    return str(value)


def _change(d: Delta) -> str:
    if isinstance(d.base, (int, float)) and isinstance(d.new, (int, float)) and not isinstance(
            d.base, bool):
        if isinstance(d.base, int) and isinstance(d.new, int) and not d.metric.endswith("bytes"):
            return f"{d.new - d.base:+d}"
        return f"x{d.new / d.base:.2f}" if d.base else "-"
    return ""


def render(deltas: list[Delta], show_all: bool = False) -> str:
    """A text table of the deltas (only those that are not "same" unless ``show_all``) and
    a one-line summary."""
    rows = [d for d in deltas if show_all or d.verdict != SAME]
    header = ("cell", "metric", "base", "new", "change", "verdict")
    table = [header] + [(d.key, d.metric, _fmt(d.base, d.metric), _fmt(d.new, d.metric),
                         _change(d), d.verdict) for d in rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in table]
    lines.insert(1, "  ".join("-" * w for w in widths))
    counts: dict[str, int] = {}
    for d in deltas:
        counts[d.verdict] = counts.get(d.verdict, 0) + 1
    cells = len({d.key for d in deltas})
    summary = f"{cells} cells compared: " + ", ".join(
        f"{n} {v}" for v, n in sorted(counts.items()))
    if not rows:
        return summary
    if any(d.verdict == IMPROVED for d in deltas):
        summary += ("\nimprovements do not fail the comparison; once intended, make the new "
                    "sweep the baseline (cp NEW perf-data/baselines/...)")
    return "\n".join(lines + ["", summary])


def regressions(deltas: list[Delta]) -> list[Delta]:
    return [d for d in deltas if d.fails]
