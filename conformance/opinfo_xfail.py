"""Known gaps of the OpInfo cells: cell id -> reason. Each entry is a strict xfail (the
cell must fail; a fix that makes it pass must remove the entry)."""

from __future__ import annotations

XFAIL: dict[str, str] = {
}
