"""README and docs stay true: their ```python blocks run (```py marks an illustrative
fragment), and CI runs the README's test command."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _blocks(path: Path, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", path.read_text(), flags=re.S)


def test_readme_opens_with_the_two_commands_and_ci_runs_the_test_command():
    setup, test = _blocks(ROOT / "README.md", "bash")[:2]
    assert "torch-trt-ref compile" in setup
    ci = (ROOT / ".ci" / "run").read_text()
    assert test.strip() in ci, ".ci/run must call the README's test command"


DOC_BLOCKS = [(p.name, i, b) for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
              for i, b in enumerate(_blocks(p, "python"))]


@pytest.mark.parametrize("name,index,code", DOC_BLOCKS,
                         ids=[f"{n}-{i}" for n, i, _ in DOC_BLOCKS])
def test_python_blocks_run(name, index, code):
    exec(compile(code, f"{name}[{index}]", "exec"), {"__name__": "__docs__"})
