"""The history dashboard (one self-contained HTML page: trends, small multiples with noise bands
and change points, the open-regressions table, the parameters used) and the ``perf history``
command: a summary, ``--sql`` over the runs, ``--html`` to draw the page, ``--annotate``."""

from __future__ import annotations

import argparse
import html
import json
from pathlib import Path

from . import changepoints, noise, plots, steps, store

STATE_CLASS = {"open": "open", "accept": "closed", "ignore": "closed", "machine": "closed"}
CSS = """body{font-family:system-ui,sans-serif;margin:1.5em;color:#222;max-width:1500px}
h1{font-size:1.5em}h2{border-bottom:1px solid #ccc;margin-top:1.6em}
table{border-collapse:collapse;font-size:.85em}td,th{border:1px solid #ddd;padding:3px 7px}
th{background:#f3f3f3}.open{background:#fde2e2}.closed{background:#e5f5e5}
.grid{display:flex;flex-wrap:wrap;gap:6px}.cell{border:1px solid #eee;padding:3px;width:300px}
.cell h4{font-size:.72em;margin:0 0 2px 0;font-family:monospace;word-break:break-all}
.cell p{font-size:.7em;margin:0;color:#555}.unstable{color:#b35900;font-weight:bold}
pre{background:#f7f7f7;padding:.6em;font-size:.75em}img{max-width:100%}"""


def _table(header: list[str], rows: list[tuple[str, list[str]]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join(f'<tr class="{cls}">' + "".join(f"<td>{c}</td>" for c in cells) + "</tr>"
                   for cls, cells in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _state(step: steps.Step) -> str:
    if step.annotation is not None:
        return f"{step.annotation['action']}: {html.escape(step.annotation['reason'])}"
    if step.open_regression:
        return "open"
    if step.same_commit:
        return "machine (one commit on both sides)"
    if step.same_code:
        return "machine (library and models unchanged between the commits)"
    if step.type in steps.GATED_TYPES:
        return "improvement"
    if step.type == "wall":
        return "wall time (never gated)"
    return "exact series (perf gate fails on any worsening)"


def steps_table(found: list[steps.Step]) -> str:
    rows = [("open" if s.open_regression else ("closed" if s.annotation else ""),
             [f"<code>{html.escape(s.series)}</code>",
              f"<code>{s.commit_before[:10]}</code>..<code>{s.commit_after[:10]}</code>",
              s.time_after, f"{s.median_before:.4g} → {s.median_after:.4g} {s.unit}",
              f"x{s.ratio:.3f}", f"{s.pvalue:.1e}", _state(s)]) for s in found]
    return _table(["series", "commit range (last before .. first after)", "first run after",
                   "median before → after", "ratio", "p", "annotation"], rows)


def _series(name: str, runs: list[store.Run]) -> store.Series:
    return next(r.series[name] for r in runs if name in r.series)


def _type(name: str, runs: list[store.Run]) -> str:
    return _series(name, runs).type


def _cell(name, runs, found, calibration, annotations) -> str:
    kind = _series(name, runs)
    spread = baseline = None
    note = ""
    if noise.has_baseline(name, runs, annotations):
        baseline = noise.baseline(name, runs, annotations)
        if kind.type in store.NOISY_TYPES:
            spread = noise.series_spread(name, runs, calibration, annotations)
            flag = ' <span class="unstable">UNSTABLE</span>' if spread.unstable else ""
            note = f"spread {100 * spread.value:.1f}% ({spread.source}, n={spread.n}){flag}; "
        note += f"baseline {baseline:.4g} {html.escape(kind.unit)}"
    img = plots.small_multiple(name, runs, found, spread, baseline)
    return (f'<div class="cell"><h4>{html.escape(name)}</h4><p>{note}</p>'
            f'<img alt="{html.escape(name)}" src="data:image/png;base64,{img}"></div>')


def suite_section(suite: str, runs: list[store.Run], calibration, annotations) -> str:
    names = store.series_names(runs)
    found = {n: steps.series_steps(n, runs, annotations) for n in names}
    baselines = {n: noise.baseline(n, runs, annotations) for n in names
                 if noise.has_baseline(n, runs, annotations)}
    counted = [n for n in names if _type(n, runs) == "work"]
    noisy = [n for n in names if _type(n, runs) in store.NOISY_TYPES and n not in counted]
    exact = [n for n in names if n not in noisy and n not in counted]
    recounted = [n for n in counted if found[n] or len({r.series[n].statistic() for r in runs
                                                        if n in r.series}) > 1]
    moved = [n for n in exact if found[n] or len({r.series[n].statistic() for r in runs
                                                  if n in r.series}) > 1]
    loaded = sum(r.loaded for r in runs)
    parts = [f"<h2>Suite {html.escape(suite)}</h2>",
             f"<p>{len(runs)} runs ({loaded} marked loaded, having started under load or "
             "run on a disturbed machine: hollow markers, not used for baselines, spreads "
             f"or change points), {len(names)} series, commits "
             f"<code>{runs[0].commit[:10]}</code> .. <code>{runs[-1].commit[:10]}</code>.</p>",
             f'<img alt="{suite} overview" src="data:image/png;base64,'
             f'{plots.overview(runs, baselines, f"{suite}: geomean ratio to baseline")}">',
             f"<h3>Time, memory and latency series ({len(noisy)})</h3><div class=\"grid\">"]
    parts += [_cell(n, runs, found[n], calibration, annotations) for n in noisy]
    parts.append(f"</div><h3>Exact series (counts, accuracy): {len(moved)} of {len(exact)} "
                 "changed</h3><div class=\"grid\">")
    parts += [_cell(n, runs, found[n], calibration, annotations) for n in moved]
    parts.append(f"</div><h3>Count tier (interpreted work counted, docs/regressions.md): "
                 f"{len(recounted)} of {len(counted)} series changed</h3><div class=\"grid\">")
    parts += [_cell(n, runs, found[n], calibration, annotations) for n in recounted]
    parts.append("</div>")
    if len(moved) < len(exact):
        parts.append(f"<p>Unchanged over every run: {len(exact) - len(moved)} exact series "
                     "(e.g. <code>" + html.escape(", ".join(n for n in exact
                                                           if n not in moved)[:300])
                     + "</code>).</p>")
    return "\n".join(parts)


def parameters() -> dict:
    return {"change points": changepoints.DEFAULT.to_json(),
            "minimum step (ratio) by type": changepoints.MIN_EFFECT,
            "noise model": noise.PARAMS,
            "open regression": f"an upward step of a {'/'.join(steps.GATED_TYPES)} series "
                               "between two commits, with no annotation at or after it",
            "noise band": f"baseline x exp(+-{plots.BAND} x spread) over the current segment",
            "geomean": "per run, over the suite's series of a line (compile totals: names "
                       "ending /total; canary excluded), of "
                       "statistic / the series' current baseline"}


def render(runs: list[store.Run], annotations: list[dict], calibration: dict | None) -> str:
    """The whole dashboard page for ``runs`` (any number of suites)."""
    suites = sorted({r.header["suite"] for r in runs})
    found = steps.all_steps(runs, annotations) if runs else []
    opened = [s for s in found if s.open_regression]
    cal = (f"calibration at <code>{calibration.get('commit', '?')[:10]}</code>, "
           f"{calibration.get('time', '?')}" if calibration else "no calibration file")
    body = [f"<h1>torch_trt_ref performance history</h1><p>{len(runs)} runs, suites: "
            f"{', '.join(map(html.escape, suites)) or 'none'}; {cal}; generated "
            f"{store.utc_now()}.</p>",
            f"<h2>Open regressions ({len(opened)})</h2>",
            steps_table(opened) if opened else "<p>None.</p>"]
    # the trends first (a person reads them at a glance), the full table of steps below
    body += [suite_section(s, [r for r in runs if r.header["suite"] == s], calibration,
                           annotations) for s in suites]
    body += [f"<h2>All change points ({len(found)})</h2>",
             steps_table(found) if found else "<p>None.</p>"]
    body.append("<h2>Parameters</h2><pre>" + html.escape(json.dumps(parameters(), indent=1))
                + "</pre>")
    return ("<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>perf history</title>"
            f"<style>{CSS}</style></head><body>" + "\n".join(body) + "</body></html>\n")


def write_glance(path: Path, runs: list[store.Run], annotations: list[dict],
                 calibration: dict | None) -> Path:
    """docs/img/perf_history.png: what a person reads first (plots.glance)."""
    found = steps.all_steps(runs, annotations) if runs else []
    panels = []
    for suite in sorted({r.header["suite"] for r in runs}):
        mine = [r for r in runs if r.header["suite"] == suite]
        names = store.series_names(mine)
        baselines = {n: noise.baseline(n, mine, annotations) for n in names
                     if noise.has_baseline(n, mine, annotations)}
        gated = [n for n in baselines if _type(n, mine) in steps.GATED_TYPES]
        spreads = sorted(noise.series_spread(n, mine, calibration, annotations).value
                         for n in gated)
        first = {}
        for i, r in enumerate(mine):
            first.setdefault(r.commit, i)
        marks = sorted({(first[s.commit_after], s.open_regression) for s in found
                        if s.series in baselines and s.commit_after in first})
        panels.append((mine, baselines, f"{suite}: geomean ratio to baseline",
                       spreads[len(spreads) // 2] if spreads else 0.0, marks))
    plots.glance(panels, [s.describe() for s in found if s.open_regression], path)
    return Path(path)


def write_dashboard(path: Path, directory: Path = store.HISTORY_DIR,
                    noise_file: Path = noise.NOISE_FILE, suite: str | None = None) -> Path:
    runs = store.load_runs(directory, suite)
    page = render(runs, store.load_annotations(directory), noise.load_calibration(noise_file))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page)
    return path


def history_command(args: argparse.Namespace) -> int:
    """``perf history``: annotate, query, draw, or (no option) summarize the history."""
    if args.annotate:
        missing = [f"--{k}" for k in ("commit", "action", "reason") if not getattr(args, k)]
        if missing:
            raise ValueError(f"--annotate needs {', '.join(missing)}")
        record = store.annotate(args.annotate, args.commit, args.action, args.reason,
                                  args.history)
        print(f"annotated {json.dumps(record)} in {args.history / store.ANNOTATIONS}")
        return 0
    if not Path(args.history).is_dir():
        raise ValueError(f"{args.history}: no history directory (perf run --record writes one)")
    runs = store.load_runs(args.history, args.suite)
    if args.sql:
        columns, rows = store.query(args.sql, runs)
        print("\t".join(columns))
        for row in rows:
            print("\t".join("" if v is None else str(v) for v in row))
        return 0
    if args.html:
        path = write_dashboard(args.html, args.history, args.noise, args.suite)
        print(f"wrote {path} ({len(runs)} runs)")
        return 0
    if args.png:
        write_glance(args.png, runs, store.load_annotations(args.history),
                     noise.load_calibration(args.noise))
        print(f"wrote {args.png} ({len(runs)} runs)")
        return 0
    suites = sorted({r.header["suite"] for r in runs})
    print(f"{len(runs)} runs in {args.history} (suites: {', '.join(suites) or 'none'})")
    opened = steps.open_regressions(runs, store.load_annotations(args.history))
    for s in opened:
        print(f"OPEN {s.describe()}")
    if opened:
        print("close one with: perf history --annotate SERIES --commit FIRST_AT "
              "--action accept|ignore|machine --reason TEXT (docs/regressions.md)")
    return 0


def add_history_subcommand(perf_subparsers) -> None:
    """Register ``perf history`` on the ``perf`` command's subparsers (perf/cli.py)."""
    h = perf_subparsers.add_parser(
        "history", help="the run history: open regressions, --sql, --html dashboard, "
                        "--annotate (docs/regressions.md)")
    h.add_argument("--history", type=Path, default=store.HISTORY_DIR,
                   help="run history directory (default perf-data/history)")
    h.add_argument("--noise", type=Path, default=noise.NOISE_FILE,
                   help="calibration file (default perf-data/noise.json)")
    h.add_argument("--suite", default=None, help="only the runs of this suite")
    h.add_argument("--sql", default=None, metavar="QUERY",
                   help="run QUERY over tables runs, samples and view stats (sqlite)")
    h.add_argument("--html", type=Path, default=None, metavar="PATH",
                   help="write the dashboard page to PATH")
    h.add_argument("--png", type=Path, default=None, metavar="PATH",
                   help="draw the dashboard at a glance (open regressions, each suite's "
                        "trend with noise band and change points) as one PNG")
    h.add_argument("--annotate", default=None, metavar="SERIES",
                   help="close a change of SERIES (a name or glob) with --commit, --action, "
                        "--reason")
    h.add_argument("--commit", default=None, help="the first commit after the change")
    h.add_argument("--action", choices=store.ACTIONS, default=None,
                   help="accept (intended), ignore (not worth acting on), machine (changed)")
    h.add_argument("--reason", default=None, help="why (kept with the annotation)")
    h.set_defaults(func=history_command)
