"""``python -m conformance --backend torch_tensorrt``: the suite through another backend
(``conformance/backend_run.py`` says what it runs and prints)."""

from __future__ import annotations

from .backend_run import main

if __name__ == "__main__":
    raise SystemExit(main())
