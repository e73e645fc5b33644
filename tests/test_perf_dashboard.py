"""The history dashboard page and the ``perf history`` command (summary, --sql, --html,
--annotate), on a small written history with one open regression."""

import argparse
import base64
import html.parser
import io
import math
import random

import pytest
from matplotlib.image import imread

from perf.gate import dashboard, store

STEP = "compile/resnet18/cpu/total"


def write_history(directory, n=14, step_at=8):
    rng = random.Random(0)
    for i in range(n):
        level = 1.3 if i >= step_at else 1.0
        store.write_run({
            "commit": f"{i:02d}" + "ab12" * 9 + "cd", "parent": None, "suite": "quick",
            "time": f"2026-11-20T10:{i:02d}:00Z",
            "machine": {"cpu": "t", "cores": 2, "mem_gib": 8.0, "node": "n"},
            "load": {"start": [1.0, 1.0, 1.0], "end": [1.0, 1.0, 1.0]}, "loaded": i == 3,
            "versions": {"python": "3", "torch": "2", "tensorrt": "1", "transformers": "4"},
            "dirty": False}, [
            {"name": STEP, "unit": "s", "type": "cpu",
             "samples": [level * math.exp(rng.gauss(0, 0.02)) for _ in range(3)]},
            {"name": "compile/resnet18/rss/peak", "unit": "MiB", "type": "rss",
             "samples": [300 + rng.random() for _ in range(3)]},
            {"name": "canary/cpu", "unit": "s", "type": "cpu", "samples": [0.2, 0.21]},
            {"name": "compile/resnet18/count/layers", "unit": "count", "type": "count",
             "samples": [50.0 + (i >= 11)]},
            {"name": "compile/resnet18/count/plan_bytes", "unit": "bytes", "type": "count",
             "samples": [1e6]}], directory)


class Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.images, self.sources, self.text = [], [], []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "img":
            self.images.append(attrs["src"])
        if tag in ("script", "link") or (tag == "img" and not attrs["src"].startswith("data:")):
            self.sources.append(attrs)

    def handle_data(self, data):
        self.text.append(data)


def command(argv):
    parser = argparse.ArgumentParser()
    dashboard.add_history_subcommand(parser.add_subparsers())
    args = parser.parse_args(["history", *argv])
    return args.func(args)


def test_page_is_self_contained_and_shows_the_open_regression(tmp_path):
    write_history(tmp_path)
    out = dashboard.write_dashboard(tmp_path / "out" / "perf_history.html", tmp_path,
                                    tmp_path / "no_noise.json")
    page = Page()
    page.feed(out.read_text())
    text = " ".join(page.text)
    assert page.sources == []  # nothing fetched: no scripts, stylesheets or remote images
    # overview + 3 time/memory series + the layer count that changed; plan_bytes is constant
    assert len(page.images) == 5
    for src in page.images:
        image = imread(io.BytesIO(base64.b64decode(src.split(",", 1)[1])), format="png")
        assert image.shape[0] > 50 and image.shape[1] > 50
    assert "Open regressions (1)" in text and STEP in text and "open" in text
    assert "1 of 2 changed" in text and "plan_bytes" in text
    assert '"max_pvalue": 0.001' in text  # the parameters are printed
    assert "1 marked loaded" in text.replace("(", "")


def test_annotated_step_is_shown_closed(tmp_path):
    write_history(tmp_path)
    runs = store.load_runs(tmp_path)
    store.annotate(STEP, runs[8].commit[:12], "accept", "new default pass", tmp_path)
    text = dashboard.render(runs, store.load_annotations(tmp_path), None)
    assert "Open regressions (0)" in text and "accept: new default pass" in text


def test_history_command(tmp_path, capsys):
    write_history(tmp_path)
    assert command(["--history", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("14 runs") and f"OPEN {STEP}" in out
    assert command(["--history", str(tmp_path), "--sql",
                    "SELECT COUNT(*) FROM runs WHERE loaded"]) == 0
    assert capsys.readouterr().out.splitlines() == ["COUNT(*)", "1"]
    assert command(["--history", str(tmp_path), "--html", str(tmp_path / "p.html")]) == 0
    assert (tmp_path / "p.html").stat().st_size > 10_000
    with pytest.raises(ValueError, match="no history directory"):
        command(["--history", str(tmp_path / "missing")])
    with pytest.raises(ValueError, match="--commit, --reason"):
        command(["--history", str(tmp_path), "--annotate", STEP, "--action", "accept"])
    assert command(["--history", str(tmp_path), "--annotate", "compile/*", "--commit",
                    "08ab12ab12ab", "--action", "machine", "--reason", "new runner"]) == 0
    capsys.readouterr()
    assert command(["--history", str(tmp_path)]) == 0
    assert "OPEN" not in capsys.readouterr().out


def test_trends_come_before_the_table_and_the_glance_png(tmp_path):
    """Issue 38: a person reads the open regressions and the trends first; the full table of
    change points is below them. ``--png`` draws the same at a glance."""
    write_history(tmp_path)
    text = dashboard.render(store.load_runs(tmp_path), [], None)
    assert (text.index("Open regressions") < text.index("Suite quick")
            < text.index("All change points"))
    assert command(["--history", str(tmp_path), "--png", str(tmp_path / "g.png")]) == 0
    image = imread(tmp_path / "g.png")
    assert image.shape[0] > 300 and image.shape[1] > 600
