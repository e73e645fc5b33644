"""A self-contained HTML report: the markdown report's tables plus the plots, inlined as
base64 PNGs (also written next to the HTML for viewing on their own)."""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

from .plots import FIGURES
from .report import markdown

STYLE = """body{font-family:sans-serif;max-width:1400px;margin:2em auto;padding:0 1em}
table{border-collapse:collapse;font-size:13px;margin:1em 0}
td,th{border:1px solid #ccc;padding:3px 6px;text-align:left}th{background:#f0f0f0}
img{max-width:100%;border:1px solid #eee;margin:0.5em 0}code{background:#f6f6f6}"""


def _inline(text: str) -> str:
    text = html.escape(text)
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", text)


def markdown_to_html(md: str) -> str:
    """The small markdown subset our report uses: headings, pipe tables, bullets, text."""
    out, rows = [], []

    def flush_table():
        if not rows:
            return
        out.append("<table>")
        for i, row in enumerate(rows):
            tag = "th" if i == 0 else "td"
            out.append("<tr>" + "".join(f"<{tag}>{_inline(c)}</{tag}>" for c in row) + "</tr>")
        out.append("</table>")
        rows.clear()

    for line in md.splitlines():
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not all(set(c) <= {"-"} for c in cells):
                rows.append(cells)
            continue
        flush_table()
        if line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            out.append(f"<h{level}>{_inline(line[level:].strip())}</h{level}>")
        elif line.startswith("- "):
            out.append(f"<li>{_inline(line[2:])}</li>")
        elif line.strip():
            out.append(f"<p>{_inline(line)}</p>")
    flush_table()
    return "\n".join(out)


def write_html(records: list[dict], path: str | Path, title: str = "Model zoo report",
               partition_anchor: list | None = None) -> Path:
    """Write the HTML report to ``path`` and each plot to ``<stem>_<figure>.png``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figures = []
    compiles = [r for r in records if r.get("kind") != "llm"]  # (llm cells: a table only)
    for name, fn in FIGURES.items():
        png = fn(compiles)
        if png is None:
            continue
        (path.parent / f"{path.stem}_{name}.png").write_bytes(png)
        data = base64.b64encode(png).decode()
        figures.append(f'<h3>{name.replace("_", " ")}</h3>'
                       f'<img alt="{name}" src="data:image/png;base64,{data}">')
    body = markdown_to_html(markdown(records, title, partition_anchor))
    head, _, rest = body.partition("\n")
    page = (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}"
            f"</title><style>{STYLE}</style></head><body>{head}\n<h2>Plots</h2>"
            + "\n".join(figures) + f"\n{rest}</body></html>")
    path.write_text(page)
    return path
