"""Run history: one append-only JSON-lines file per recorded run under perf-data/history/ (a header,
then one line of raw samples per series), annotations that close a change, and a reader that
loads every run into an in-memory sqlite3 database for ad-hoc queries."""

from __future__ import annotations

import fnmatch
import json
import math
import sqlite3
import statistics
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

# run data lives beside the code, outside the package: <repository>/perf-data/
DATA = Path(__file__).resolve().parents[2] / "perf-data"
HISTORY_DIR = DATA / "history"
ANNOTATIONS = "annotations.jsonl"
SCHEMA = 1
HEADER_KEYS = ("commit", "parent", "suite", "time", "machine", "load", "loaded", "versions",
               "dirty")
SERIES_TYPES = ("cpu", "wall", "rss", "latency", "count", "accuracy", "work")
ACTIONS = ("accept", "ignore", "machine")
# judged on log ratios against a spread; the rest are exact. "work": the count tier's counts of
# interpreted work (bytecodes, calls), machine-independent but judged on a ratio, since a
# change to the library moves them a little (perf/gate/counting.py)
NOISY_TYPES = ("cpu", "wall", "rss", "latency", "work")
# what load cannot change: a run marked loaded still counts for these (a count of work done)
LOAD_FREE_TYPES = ("work",)


@dataclass
class Series:
    """The raw samples of one series in one run, ``rounds`` consecutive equal groups of them
    (a round: the fresh processes forked from one round's new measuring servers)."""

    name: str
    unit: str
    type: str
    samples: list[float] = field(default_factory=list)
    rounds: int = 1

    def round_samples(self) -> list[list[float]]:
        """The samples of each round (one group when they do not split into ``rounds``)."""
        n, k = len(self.samples), self.rounds
        if k <= 1 or n % k:
            return [list(self.samples)]
        size = n // k
        return [list(self.samples[i:i + size]) for i in range(0, n, size)]

    def statistic(self) -> float:
        """The one number of this run. Times: the mean over rounds of each round's minimum
        (within a round interference only ever adds time; between rounds the servers' memory
        layouts differ both ways, so they are averaged: Note [Round minimum]); the median for
        RSS and the count tier's work, the exact value for counts and accuracy."""
        if not self.samples:
            raise ValueError(f"series {self.name!r} has no samples")
        if self.type in ("cpu", "wall", "latency"):
            return statistics.fmean(min(r) for r in self.round_samples())
        if self.type in ("rss", "work"):
            return statistics.median(self.samples)
        return self.samples[0]


# Note [Round minimum]: a quick run measures each compile in 3 rounds of new servers, 3 fresh
# processes forked from each. On the 30 quiet calibration runs at 95e5feb, the minima of one
# run's 3 rounds differed about as much as whole runs did (lgamma_graph's ~2 ms conversion
# phase: log sd 0.061 between the rounds of a run), so the minimum of all 9 samples took the
# luckiest server and moved with it: log sd 0.078 over the 30 runs, against 0.050 for the mean
# of the 3 round minima. noise.json's robust spreads of the 24 compile CPU series, the same 30
# runs both ways: 18 fell (lgamma_graph's conversion 0.109 -> 0.057), 6 rose, none above
# 0.045 (resnet18's capture 0.031 -> 0.045, its build 0.018 -> 0.029). Out of sample (the
# 20 sensitivity trials of session 13) the gain shrank: that phase 0.069 -> 0.060, and over 15
# phases the sd fell in 7 (median ratio 1.03); docs/regressions.md, "Statistics".
LEGACY_ROUNDS_SERIES = "canary/cpu"  # measured once a round: a record without "rounds"


def _legacy_rounds(legacy: list[Series], series: dict[str, Series]) -> None:
    """Runs recorded before series carried ``rounds`` measured the canary loop once in each
    round: its sample count is the run's rounds (each ``legacy`` series that splits evenly
    into them gets them)."""
    canary = series.get(LEGACY_ROUNDS_SERIES)
    rounds = len(canary.samples) if canary else 1
    for s in legacy:
        if rounds > 1 and len(s.samples) % rounds == 0:
            s.rounds = rounds


@dataclass
class Run:
    """One recorded run: its header and its series by name."""

    header: dict
    series: dict[str, Series]
    path: Path

    @property
    def commit(self) -> str:
        return self.header["commit"]

    @property
    def time(self) -> str:
        return self.header["time"]

    @property
    def loaded(self) -> bool:
        return bool(self.header.get("loaded"))


def utc_now() -> str:
    """The current time as the ISO 8601 UTC string headers carry (second resolution)."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(timezone.utc)


def _check_header(header: dict) -> None:
    missing = [k for k in HEADER_KEYS if k not in header]
    if missing:
        raise ValueError(f"run header lacks {missing}; a header carries {list(HEADER_KEYS)}")
    parse_time(header["time"])


def _check_series(s: dict) -> None:
    for key in ("name", "unit", "type", "samples"):
        if key not in s:
            raise ValueError(f"series {s.get('name', '?')!r} lacks {key!r}")
    if s["type"] not in SERIES_TYPES:
        raise ValueError(f"series {s['name']!r} has type {s['type']!r}; "
                         f"accepted: {', '.join(SERIES_TYPES)}")
    if not s["samples"]:
        raise ValueError(f"series {s['name']!r} has no samples")
    if not all(math.isfinite(v) for v in s["samples"]):
        raise ValueError(f"series {s['name']!r} has a sample that is not a finite number")
    rounds = s.get("rounds", 1)
    if not isinstance(rounds, int) or rounds < 1 or len(s["samples"]) % rounds:
        raise ValueError(f"series {s['name']!r}: rounds {rounds!r} must be a positive integer "
                         f"dividing its {len(s['samples'])} samples into equal rounds")


def write_run(header: dict, series: list[dict], directory: Path = HISTORY_DIR) -> Path:
    """Write one run as ``<YYYYmmddTHHMMSSZ>_<commit[:10]>_<suite>.jsonl``; never overwrites
    (a second run in the same second at the same commit gets a ``-2`` suffix)."""
    _check_header(header)
    for s in series:
        _check_series(s)
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    stamp = parse_time(header["time"]).strftime("%Y%m%dT%H%M%SZ")
    stem = f"{stamp}_{header['commit'][:10]}_{header['suite']}"
    lines = [json.dumps({"kind": "header", "schema": SCHEMA, **header})]
    lines += [json.dumps({"kind": "series", "name": s["name"], "unit": s["unit"],
                          "type": s["type"], "samples": [float(v) for v in s["samples"]],
                          "rounds": s.get("rounds", 1)})
              for s in series]
    for attempt in range(1, 100):
        path = directory / (f"{stem}.jsonl" if attempt == 1 else f"{stem}-{attempt}.jsonl")
        try:
            with open(path, "x") as f:
                f.write("\n".join(lines) + "\n")
            return path
        except FileExistsError:
            continue
    raise FileExistsError(f"too many runs named {stem}* in {directory}")


def read_run(path: Path) -> Run:
    """Read one history file; a malformed line is an error naming the file and line."""
    header, series, legacy = None, {}, []
    for i, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}:{i}: not JSON ({e})") from None
        if rec.get("kind") == "header":
            header = {k: v for k, v in rec.items() if k != "kind"}
        elif rec.get("kind") == "series":
            series[rec["name"]] = Series(rec["name"], rec["unit"], rec["type"], rec["samples"],
                                         rec.get("rounds", 1))
            if "rounds" not in rec:
                legacy.append(series[rec["name"]])
        else:
            raise ValueError(f"{path}:{i}: kind must be 'header' or 'series'")
    if header is None:
        raise ValueError(f"{path}: no header line")
    _legacy_rounds(legacy, series)
    if header.get("schema") != SCHEMA:
        raise ValueError(f"{path}: schema {header.get('schema')!r}, this reader knows {SCHEMA}")
    return Run(header, series, Path(path))


def load_runs(directory: Path = HISTORY_DIR, suite: str | None = None) -> list[Run]:
    """Every run in ``directory`` (of ``suite`` when given), oldest first."""
    runs = [read_run(p) for p in sorted(Path(directory).glob("*.jsonl")) if p.name != ANNOTATIONS]
    if suite is not None:
        runs = [r for r in runs if r.header["suite"] == suite]
    return sorted(runs, key=lambda r: (parse_time(r.time), r.path.name))


def load_annotations(directory: Path = HISTORY_DIR) -> list[dict]:
    """The annotations of ``directory``, in the order they were written."""
    path = Path(directory) / ANNOTATIONS
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def annotate(series: str, commit: str, action: str, reason: str,
             directory: Path = HISTORY_DIR, time: str | None = None) -> dict:
    """Append one annotation: ``series`` (a name or glob, e.g. ``compile/*/cpu/*``) at ``commit``
    is accepted (an intended change), ignored (not worth acting on) or a machine change. Each
    closes the change at that commit and starts the series' baseline there."""
    if action not in ACTIONS:
        raise ValueError(f"annotation action {action!r}; accepted: {', '.join(ACTIONS)}")
    if not reason.strip():
        raise ValueError("an annotation needs a reason")
    if len(commit.strip()) < 7:
        raise ValueError(f"annotation commit {commit!r}: give the commit where the change "
                         "happened, at least 7 hex digits (Step.commit_after)")
    record = {"series": series, "commit": commit, "action": action, "reason": reason,
              "time": time or utc_now()}
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / ANNOTATIONS, "a") as f:
        f.write(json.dumps(record) + "\n")
    return record


def annotations_for(name: str, annotations: list[dict]) -> list[dict]:
    """The annotations whose pattern matches series ``name``."""
    return [a for a in annotations if fnmatch.fnmatchcase(name, a["series"])]


def commit_matches(commit: str, ref: str) -> bool:
    """Whether a full commit id and an annotation's (possibly short) one name the same commit."""
    return bool(ref) and (commit.startswith(ref) or ref.startswith(commit))


def to_sqlite(runs: list[Run]) -> sqlite3.Connection:
    """All runs in an in-memory database: tables ``runs`` and ``samples`` and the view
    ``stats`` (one row per run and series with its statistic, as Series.statistic defines it)."""
    db = sqlite3.connect(":memory:")
    db.executescript("""
        CREATE TABLE runs (run_id INTEGER PRIMARY KEY, commit_id TEXT, parent TEXT, suite TEXT,
            time TEXT, loaded INTEGER, dirty INTEGER, load_start REAL, load_end REAL,
            cpu TEXT, cores INTEGER, mem_gib REAL, node TEXT, python TEXT, torch TEXT,
            tensorrt TEXT, transformers TEXT, path TEXT);
        CREATE TABLE samples (run_id INTEGER, series TEXT, unit TEXT, type TEXT, i INTEGER,
            value REAL);
        CREATE TABLE statistics (run_id INTEGER, series TEXT, unit TEXT, type TEXT, value REAL);
        CREATE VIEW stats AS SELECT r.run_id, r.commit_id, r.suite, r.time, r.loaded, s.series,
            s.unit, s.type, s.value FROM statistics s JOIN runs r USING (run_id);
    """)
    for run_id, run in enumerate(runs, 1):
        h = run.header
        m, v, load = h.get("machine", {}), h.get("versions", {}), h.get("load", {})
        db.execute("INSERT INTO runs VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", (
            run_id, h["commit"], h.get("parent"), h["suite"], h["time"], int(run.loaded),
            int(bool(h.get("dirty"))), (load.get("start") or [None])[0],
            (load.get("end") or [None])[0], m.get("cpu"), m.get("cores"), m.get("mem_gib"),
            m.get("node"), v.get("python"), v.get("torch"), v.get("tensorrt"),
            v.get("transformers"), str(run.path)))
        for s in run.series.values():
            db.executemany("INSERT INTO samples VALUES (?,?,?,?,?,?)",
                           [(run_id, s.name, s.unit, s.type, i, x)
                            for i, x in enumerate(s.samples)])
            db.execute("INSERT INTO statistics VALUES (?,?,?,?,?)",
                       (run_id, s.name, s.unit, s.type, s.statistic()))
    db.commit()
    return db


def query(sql: str, runs: list[Run]) -> tuple[list[str], list[tuple]]:
    """Run ``sql`` over to_sqlite(runs): (column names, rows); a bad query names the tables."""
    db = to_sqlite(runs)
    try:
        cur = db.execute(sql)
    except sqlite3.Error as e:
        raise ValueError(f"sql error: {e}; tables: runs(run_id, commit_id, parent, suite, time, "
                         "loaded, dirty, load_start, load_end, cpu, cores, mem_gib, node, "
                         "python, torch, tensorrt, transformers, path), samples(run_id, series, "
                         "unit, type, i, value), view stats(run_id, commit_id, suite, time, "
                         "loaded, series, unit, type, value)") from None
    return [d[0] for d in cur.description or []], cur.fetchall()


def series_points(name: str, runs: list[Run], loaded: bool = False) -> list[tuple[Run, float]]:
    """(run, statistic) of every run holding series ``name``, oldest first; runs marked loaded
    are left out unless ``loaded`` (or the series counts work: load does not change it)."""
    return [(r, r.series[name].statistic()) for r in runs
            if name in r.series and (loaded or not r.loaded
                                     or r.series[name].type in LOAD_FREE_TYPES)]


def series_names(runs: list[Run]) -> list[str]:
    """Every series name in ``runs``, in order of first appearance."""
    return list(dict.fromkeys(n for r in runs for n in r.series))
