"""The import graph is strictly layered (DESIGN.md D12, docs/architecture.md "Layers").

Every ``.py`` of torch_trt_ref/, zoo/, conformance/ and perf/ is parsed with ``ast``; every
import statement, function-local ones included, is an edge from the importing module to the
module it names (``from pkg import name`` names ``pkg.name`` when that is a module, else
``pkg``). The graph must have no cycle, no import from the library into the harness, no
import from one converter file into another, and no import that goes up the layer order
``LAYERS`` below. Each failure names the offending edges (file:line).

Run as a script (``python tests/test_import_graph.py``) it prints the counts.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("torch_trt_ref", "zoo", "conformance", "perf")
HARNESS = ("zoo", "conformance", "perf")
CONVERTERS = "torch_trt_ref.conversion.converters"

# The layer order, bottom up: a module may import its own layer or a lower one. A module is
# placed by the longest prefix of its dotted name listed here (docs/architecture.md
# "Layers" explains each). Package ``__init__`` files that re-export a public API sit with
# the highest module they re-export.
LAYERS: list[tuple[str, ...]] = [
    # 0: plain data and the TensorRT shim
    ("torch_trt_ref._trt", "torch_trt_ref.settings", "torch_trt_ref.inputs",
     "torch_trt_ref.weights", "torch_trt_ref.accuracy", "torch_trt_ref.report",
     "torch_trt_ref.memory", "torch_trt_ref.ownership", "torch_trt_ref.threads",
     "torch_trt_ref.errors", "torch_trt_ref.observe",
     "torch_trt_ref.library_ops", "torch_trt_ref.missing_trt", "torch_trt_ref.work",
     "torch_trt_ref.kv_cache_op",  # the static KV cache write op (torch only)
     "torch_trt_ref.quantization"),  # the quantizer ops and PTQ: torch only
    # 1: capture, arguments, the engine cache, and the conversion layer's base
    ("torch_trt_ref.capture", "torch_trt_ref.capture_errors", "torch_trt_ref.resized_inputs",
     "torch_trt_ref.ranges", "torch_trt_ref.size_conditions", "torch_trt_ref.torchscript",
     "torch_trt_ref.arguments",
     "torch_trt_ref.engine_cache",
     "torch_trt_ref.conversion.registry", "torch_trt_ref.conversion.symbols",
     "torch_trt_ref.conversion.args",
     "torch_trt_ref.conversion.context", "torch_trt_ref.conversion.dims",
     "torch_trt_ref.conversion.shapes", "torch_trt_ref.conversion._trt_ops",
     "torch_trt_ref.conversion.helpers"),
    # 2: the building blocks converters share
    ("torch_trt_ref.conversion.blocks",),
    # 3: converters (never each other), the interpreter that runs them
    ("torch_trt_ref.conversion",),
    # 4: lowering and the runtime (executors, the runtime module, Engine)
    ("torch_trt_ref.lowering", "torch_trt_ref.runtime"),
    # 5: partitioning, build, serialize, refit, the size cover
    ("torch_trt_ref.partitioning", "torch_trt_ref.build", "torch_trt_ref.serialize",
     "torch_trt_ref.refit", "torch_trt_ref.size_cover"),
    # 6: the orchestrator
    ("torch_trt_ref.compiler",),
    # 7: front ends over the compiler, and debugging tools
    ("torch_trt_ref.dynamo_backend", "torch_trt_ref.debug", "torch_trt_ref.commands",
     "torch_trt_ref.llm", "torch_trt_ref.mutable"),
    # 8: the public API package (``$``: this module only, not the modules under it)
    ("torch_trt_ref$",),
    # 9: the harness
    ("zoo", "conformance"),
    # 10-12: the performance harness in its wings (docs/architecture.md "The harness's
    # layers"): the regression gate, the one-off studies, the pytest-benchmark suites
    ("perf.gate",),
    ("perf.studies",),
    ("perf.bench",),
    # 13: the command lines (and ``perf``'s package docstring)
    ("torch_trt_ref.cli", "perf.cli", "perf$"),
]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    """Every module of the four packages, by dotted name."""
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            found[_module_name(path)] = path
    return found


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The longest known module that ``name`` is or lies in (None: outside the packages)."""
    while name:
        if name in known:
            return name
        name = name.rpartition(".")[0]
    return None


def edges(known: dict[str, Path] | None = None) -> list[tuple[str, str, str]]:
    """(importer, imported, "file:line") for every import between the packages."""
    known = known or modules()
    found = []
    for mod, path in known.items():
        is_pkg = path.name == "__init__.py"
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            targets = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = mod.split(".")
                    base = base[: len(base) - node.level + (1 if is_pkg else 0)]
                    pkg = ".".join(base + ([node.module] if node.module else []))
                else:
                    pkg = node.module or ""
                targets = [f"{pkg}.{alias.name}" if f"{pkg}.{alias.name}" in known else pkg
                           for alias in node.names]
            for target in targets:
                dest = _resolve(target, known)
                if dest is not None and dest != mod:
                    where = f"{path.relative_to(ROOT)}:{node.lineno}"
                    found.append((mod, dest, where))
    return found


def layer_of(mod: str) -> int:
    best, best_len = None, -1
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            exact = prefix.endswith("$")
            prefix = prefix.rstrip("$")
            inside = mod == prefix or (not exact and mod.startswith(prefix + "."))
            if inside and len(prefix) > best_len:
                best, best_len = index, len(prefix)
    if best is None:
        raise AssertionError(f"module {mod} has no layer in LAYERS: add it")
    return best


def cycles(graph_edges) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    graph: dict[str, set[str]] = {}
    for src, dst, _ in graph_edges:
        graph.setdefault(src, set()).add(dst)
        graph.setdefault(dst, set())
    index, low, stack, on_stack, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _top(mod):
    return mod.split(".")[0]


def library_to_harness(graph_edges):
    return [e for e in graph_edges if _top(e[0]) == "torch_trt_ref" and _top(e[1]) in HARNESS]


def converter_to_converter(graph_edges):
    def is_conv(m):
        return m.startswith(CONVERTERS + ".")
    return [e for e in graph_edges if is_conv(e[0]) and is_conv(e[1])]


def upward(graph_edges):
    return [e for e in graph_edges if layer_of(e[1]) > layer_of(e[0])]


def _show(bad):
    return "\n".join(f"  {src} -> {dst}  ({where})" for src, dst, where in bad)


def test_every_module_has_a_layer():
    for mod in modules():
        layer_of(mod)


def test_no_cycles():
    graph_edges = edges()
    found = cycles(graph_edges)
    lines = []
    for comp in found:
        members = set(comp)
        inside = [e for e in graph_edges if e[0] in members and e[1] in members]
        lines.append(f"cycle of {len(comp)} modules:\n{_show(inside)}")
    assert not found, "import cycles:\n" + "\n".join(lines)


def test_library_imports_no_harness():
    bad = library_to_harness(edges())
    assert not bad, "the library imports the harness:\n" + _show(bad)


def test_no_converter_imports_another():
    bad = converter_to_converter(edges())
    assert not bad, ("converters import each other (share code through "
                     "conversion/blocks/):\n" + _show(bad))


def test_every_import_goes_down():
    bad = upward(edges())
    assert not bad, "imports that go up the layer order (LAYERS):\n" + "\n".join(
        f"  {s} (layer {layer_of(s)}) -> {d} (layer {layer_of(d)})  ({w})" for s, d, w in bad)


def test_the_checker_sees_a_violation(tmp_path):
    """The analysis itself: a function-local import up the layers and a cycle are found."""
    known = {"torch_trt_ref.settings": tmp_path / "a.py", "torch_trt_ref.compiler":
             tmp_path / "b.py"}
    known["torch_trt_ref.settings"].write_text(
        "def f():\n    from torch_trt_ref.compiler import g\n")
    known["torch_trt_ref.compiler"].write_text("from . import settings\n")
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        # the paths are outside the repository: relative_to(ROOT) needs them under it
        found = edges(known)
    finally:
        ROOT = saved
    assert ("torch_trt_ref.settings", "torch_trt_ref.compiler") in [e[:2] for e in found]
    assert upward(found) and cycles(found)


def test_the_harness_layers_hold():
    """The harness's wings are ordered: the gate imports neither the studies, the benchmark
    suites nor the CLI, and zoo/conformance import nothing of perf."""
    for src, dst in [("perf.gate.rules", "perf.studies.peer_scale"),
                     ("perf.gate.runner", "perf.bench.ratios"),
                     ("perf.studies.phase_ab", "perf.bench.run"),
                     ("perf.bench.run", "perf.cli"), ("perf.gate.verdict", "perf.cli"),
                     ("zoo.harness", "perf.gate.store"), ("conformance.runner", "perf")]:
        assert upward([(src, dst, "x.py:1")]), f"{src} -> {dst} should go up the layers"
    for src, dst in [("perf.cli", "perf.gate.verdict"), ("perf.bench.test_peer_bench",
                     "perf.studies.peer_scale"), ("perf.bench.run", "perf.gate.families"),
                     ("perf.gate.families", "conformance.runner")]:
        assert not upward([(src, dst, "x.py:1")]), f"{src} -> {dst} should go down"


if __name__ == "__main__":
    graph_edges = edges()
    found = cycles(graph_edges)
    print(f"modules {len(modules())}, edges {len(graph_edges)}")
    print(f"cycles {len(found)} ({sum(map(len, found))} modules): "
          + "; ".join(" ".join(c) for c in found))
    def pairs(bad):
        return len({e[:2] for e in bad})
    print(f"library->harness {pairs(library_to_harness(graph_edges))} module pairs")
    print(_show(library_to_harness(graph_edges)))
    c2c = converter_to_converter(graph_edges)
    print(f"converter->converter {pairs(c2c)} module pairs, {len(c2c)} imported names")
    print(_show(c2c) if "-v" in sys.argv else "")
    up = upward(graph_edges)
    print(f"upward {pairs(up)} module pairs")
    print(_show(up))
