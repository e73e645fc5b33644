"""The verdict rules of the regression gate, as pure functions of samples.

Screen: a noisy series (CPU seconds, latency, peak RSS) is a suspect when its statistic is
more than SCREEN_SPREADS spreads (perf.gate.noise) above its history median AND above the
minimum effect; counts and work counters are exact, so any increase is REGRESSED. Confirm:
a suspect re-measured A/B (working tree A, base commit B, alternating fresh processes
ABBA) is REGRESSED only when a one-sided exact Mann-Whitney test gives p < ALPHA and the
ratio of medians is still above the minimum effect; otherwise it is noise (unconfirmed).
Machine drift: when the canary and most time series moved the same way, time series are
screened relative to the canary. The count tier (type "work": bytecodes and calls counted,
perf/gate/counting.py) does not depend on the machine: a counted series more than
SCREEN_SPREADS spreads and MIN_EFFECT["work"] above its history is REGRESSED once a
re-count in a fresh process agrees (``recounted``), with no timing A/B."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from scipy.stats import mannwhitneyu

from . import noise, store
from .suites import CANARY_SERIES, COLD_CANARY, is_canary

SCREEN_SPREADS = 4.0
# time 10%, memory 5%, counted work 1% (its spread over reruns and servers is 0: a 2% change
# is 2x over it; docs/regressions.md, "The count tier")
MIN_EFFECT = {"cpu": 0.10, "latency": 0.10, "rss": 0.05, "work": 0.01}
TIME_TYPES = ("cpu", "latency")  # what machine drift moves
MAX_SUSPECTS = 8
ALPHA = 0.01
AB_EACH = 6  # processes per side in a confirmation (ABBA order)
# a micro-benchmark process costs < 1 s and its jitter between processes is ~7% here: more
# processes buy the power to confirm a 20% slowdown reliably (see docs/regressions.md)
CHEAP_AB_EACH = 10
# a confirmation that is not REGRESSED but close (median ratio over the minimum effect, p
# under this) is measured once more with as many processes per side, and judged on all its
# samples (confirm.confirm_group): one neighbour's spike among 6 + 6 processes hid a 30%
# slower compile (x1.23, p = 0.032) beside other work (issue 38). Two looks at ALPHA
# each: at most 2 x ALPHA false alarms, and only past the minimum effect
EXTEND_P = 0.2
DRIFT_FRACTION = 0.5  # "most series": at least this fraction of the time series moved
# a run is disturbed when its cold canary is this many spreads, and at least this much,
# above its history median (docs/regressions.md, "Disturbed runs")
DISTURBED_SPREADS, DISTURBED_MIN = SCREEN_SPREADS, 0.05
PARAMS = {"screen_spreads": SCREEN_SPREADS, "min_effect": MIN_EFFECT,
          "max_suspects": MAX_SUSPECTS, "alpha": ALPHA, "ab_each": AB_EACH,
          "cheap_ab_each": CHEAP_AB_EACH, "extend_p": EXTEND_P,
          "test": "scipy.stats.mannwhitneyu(alternative='greater', method='exact')",
          "drift_fraction": DRIFT_FRACTION}


@dataclass
class Screened:
    """One series of the current run against its history."""

    name: str
    type: str
    unit: str
    value: float
    baseline: float | None = None
    spread: noise.Spread | None = None
    verdict: str = "ok"  # ok | suspect | REGRESSED | improved | unstable | new | shown
    z: float = 0.0  # log ratio in spreads (after any drift correction)

    @property
    def ratio(self) -> float | None:
        if self.baseline in (None, 0):
            return None
        return self.value / self.baseline


def _log_ratio(value: float, base: float) -> float:
    return math.log(max(value, 1e-12) / max(base, 1e-12))


def screen(current: dict[str, store.Series], runs: list[store.Run],
           calibration: dict | None = None, annotations: list[dict] | None = None,
           drift: float = 1.0, families: float | None = None) -> list[Screened]:
    """Each series of ``current`` against ``runs`` (history); ``drift`` divides the ratio
    of time series (see ``machine_drift``), ``families`` that of the converter families'
    instead when given (``family_drift``)."""
    out = []
    for name, s in current.items():
        row = Screened(name, s.type, s.unit, s.statistic())
        out.append(row)
        if not noise.has_baseline(name, runs, annotations):  # never measured, or only
            row.verdict = "new"  # before a machine annotation: new on this machine
            continue
        row.baseline = noise.baseline(name, runs, annotations)
        if s.type not in store.NOISY_TYPES:  # counts: exact
            row.verdict = ("REGRESSED" if row.value > row.baseline
                           else "improved" if row.value < row.baseline else "ok")
            continue
        if s.type not in MIN_EFFECT or is_canary(name):
            row.verdict = "shown"  # wall time and the canaries are never gated
            continue
        row.spread = noise.series_spread(name, runs, calibration, annotations, s.type)
        log_ratio = _log_ratio(row.value, row.baseline)
        if s.type in TIME_TYPES:
            log_ratio -= math.log(families if families and name.startswith("family/")
                                  else drift)
        row.z = log_ratio / max(row.spread.value, 1e-9)
        limit = threshold(s.type, row.spread.value)
        if row.spread.unstable:
            row.verdict = "unstable"
        elif log_ratio > limit:
            row.verdict = "suspect"
        elif s.type == "work" and log_ratio < -limit:
            row.verdict = "improved"
    return out


def threshold(type_: str, spread: float) -> float:
    """The log ratio a series of ``type_`` must exceed to be a suspect: SCREEN_SPREADS
    spreads and the type's minimum effect."""
    return max(SCREEN_SPREADS * spread, math.log1p(MIN_EFFECT[type_]))


def recounted(row: Screened, value: float) -> bool:
    """Whether a counted suspect is REGRESSED: its re-count (a fresh process) is over the
    threshold too. A count that does not repeat is a flake of the measurement, not a
    regression (none was seen: docs/regressions.md)."""
    return _log_ratio(value, row.baseline) > threshold(row.type, row.spread.value)


def machine_drift(rows: list[Screened]) -> float | None:
    """The canary's ratio when the run drifted: the canary moved by more than the time
    minimum effect and at least DRIFT_FRACTION of the time series moved beyond it the same
    way; else None."""
    canary = next((r for r in rows if r.name == CANARY_SERIES and r.ratio), None)
    if canary is None or abs(math.log(canary.ratio)) <= math.log1p(MIN_EFFECT["cpu"]):
        return None
    sign = 1 if canary.ratio > 1 else -1
    times = [r for r in rows if r.type in ("cpu", "latency") and r.ratio
             and not is_canary(r.name)]
    moved = [r for r in times if sign * math.log(r.ratio) > math.log1p(MIN_EFFECT["cpu"])]
    return canary.ratio if times and len(moved) >= DRIFT_FRACTION * len(times) else None


MIN_FAMILIES = 8  # converter families a run needs before their median move is trusted


def family_drift(rows: list[Screened]) -> float | None:
    """On a machine that is not the history's: the median move of the converter families'
    CPU series, the drift they are screened relative to instead of the canary's (None with
    fewer than MIN_FAMILIES). The families are one kind of code (the interpreter converting
    one-op graphs) and move together, unlike a Python loop: on a machine whose canary read
    x3.83 they read x4.75-x5.62 (median x4.87), so all 8 suspects the history screen chose
    were families and all 8 were noise when confirmed A/B (docs/regressions.md, "Gate
    time"). Relative to their median, one family 20% slower still stands out; a slowdown
    of every family alike does not (the compiles' conversion phases, screened A/B, and the
    count tier see that)."""
    ratios = [r.ratio for r in rows
              if r.name.startswith("family/") and r.type == "cpu" and r.ratio]
    return statistics.median(ratios) if len(ratios) >= MIN_FAMILIES else None


def foreign_machine(rows: list[Screened]) -> float | None:
    """The canary's ratio to its history when this machine is not the history's (the canary
    moved by more than the time minimum effect either way: its own spread is ~1%), else
    None. Then a history recorded elsewhere cannot screen time: code does not scale with a
    canary (issue 38: canary x3-4, converter families x5-9), so compile series are screened
    A/B against the base in the same run (verdict.ab_screen)."""
    canary = next((r for r in rows if r.name == CANARY_SERIES and r.ratio), None)
    if canary is None or abs(math.log(canary.ratio)) <= math.log1p(MIN_EFFECT["cpu"]):
        return None
    return canary.ratio


def suspects(rows: list[Screened], limit: int = MAX_SUSPECTS) -> list[Screened]:
    """The noisy suspects to confirm, largest first, at most ``limit``."""
    found = sorted((r for r in rows if r.verdict == "suspect" and r.type != "work"),
                   key=lambda r: -r.z)
    return found[:limit]


def count_suspects(rows: list[Screened]) -> list[Screened]:
    """The count tier's suspects (re-counted, never A/B'd), largest ratio first."""
    return sorted((r for r in rows if r.verdict == "suspect" and r.type == "work"),
                  key=lambda r: -(r.ratio or 0))


def ab_each(group: str) -> int:
    """Processes per side when confirming ``group``: more for the cheap micro-benchmarks."""
    return AB_EACH if group.startswith(("compile:", "llm:")) else CHEAP_AB_EACH


def abba(each: int = AB_EACH) -> list[str]:
    """The order of a confirmation's processes: ABBA repeated, ``each`` per side."""
    if each < 1 or each % 2:
        raise ValueError(f"A/B processes per side must be a positive even number, got {each}")
    return list("ABBA" * (each // 2))


@dataclass
class Confirmation:
    name: str
    type: str
    a: list[float] = field(default_factory=list)  # working tree
    b: list[float] = field(default_factory=list)  # base commit

    @property
    def pvalue(self) -> float:
        return float(mannwhitneyu(self.a, self.b, alternative="greater",
                                  method="exact").pvalue)

    @property
    def ratio(self) -> float:
        return statistics.median(self.a) / max(statistics.median(self.b), 1e-12)

    @property
    def regressed(self) -> bool:
        return self.pvalue < ALPHA and self.ratio > 1 + MIN_EFFECT[self.type]

    @property
    def borderline(self) -> bool:
        """Not REGRESSED, but over the minimum effect with p < EXTEND_P: worth as many
        processes again (``EXTEND_P``)."""
        return (not self.regressed and self.ratio > 1 + MIN_EFFECT[self.type]
                and self.pvalue < EXTEND_P)

    def line(self) -> str:
        head = "REGRESSED" if self.regressed else "noise (unconfirmed)"
        text = (f"{head} {self.name}: x{self.ratio:.3f} (median A/B), Mann-Whitney p = "
                f"{self.pvalue:.2g} (needs < {ALPHA} and x > {1 + MIN_EFFECT[self.type]:.2f})")
        if not self.regressed:
            text += f"\n  A (working tree): {_fmt(self.a)}\n  B (base):         {_fmt(self.b)}"
        return text


def _fmt(values: list[float]) -> str:
    return " ".join(f"{v:.4g}" for v in values)


def exact_line(row: Screened) -> str:
    return (f"REGRESSED {row.name}: {row.value:g} (history {row.baseline:g}; a count is "
            "exact, any increase regresses)")


def count_line(row: Screened, recount: float | None, regressed: bool) -> str:
    """The verdict line of a count-tier suspect after its re-count."""
    head = "REGRESSED" if regressed else "count flake (not repeated)"
    again = "not re-counted" if recount is None else f"re-counted {recount:g}"
    return (f"{head} {row.name}: {row.value:g} {row.unit} (history {row.baseline:g}, "
            f"x{row.ratio:.4f}; {again}; the count tier's threshold "
            f"x{math.exp(threshold(row.type, row.spread.value)):.3f})")


def disturbance(current: dict[str, store.Series], runs: list[store.Run],
                annotations: list[dict] | None = None) -> float | None:
    """The cold canary's ratio to its history median when ``current`` ran on a disturbed
    machine (a neighbour contending for memory: the load average does not see it): more
    than DISTURBED_SPREADS spreads and DISTURBED_MIN above. None when it was not, or when
    the cold canary has fewer than noise.MIN_HISTORY quiet points to judge by."""
    cold = current.get(COLD_CANARY)
    logs = [math.log(v) for _, v in noise.current_segment(COLD_CANARY, runs, annotations)
            if v > 0]
    if cold is None or cold.statistic() <= 0 or len(logs) < noise.MIN_HISTORY:
        return None
    ratio = cold.statistic() / math.exp(statistics.median(logs))
    limit = max(DISTURBED_SPREADS * noise.robust_sd(logs), math.log1p(DISTURBED_MIN))
    return ratio if math.log(ratio) > limit else None


def summary(rows: list[Screened], n_suspects: int, n_regressed: int, canary: float | None,
            load: tuple[float, float]) -> str:
    unstable = sum(r.verdict == "unstable" for r in rows)
    canary_text = f"x{canary:.2f}" if canary else "n/a"
    return (f"{len(rows)} series screened, {n_suspects} suspects, {n_regressed} confirmed; "
            f"canary {canary_text}; load {load[0]:.1f}->{load[1]:.1f}; {unstable} unstable")
