"""The standalone repro ``reduce`` writes: a Python script with the failing subgraph's FX
code (in the precision and in float64) and a ``.pt`` of its weights and boundary values;
it compiles the subgraph with the same settings and prints the verdict."""

from __future__ import annotations

import textwrap
from pathlib import Path

import torch

from .. import accuracy
from ..conversion.registry import CONVERTERS
from ..settings import CompilationSettings, op_name, settings_json
from .graphs import cast_graph

# settings the repro leaves at their defaults (min_block_size is 1: the subgraph is small)
_SKIPPED_SETTINGS = {"progress", "min_block_size", "extra", "cache_engines", "engine_cache_dir",
                     "engine_cache_size"}

_TEMPLATE = '''\
"""Repro written by torch_trt_ref.debug.reduce: {count} node(s) of a lowered graph whose
compile leaves the float64 rule ({nodes}).

When it was written: {message}

Run ``python {script}``: prints the verdict; exit status 1 while the failure remains."""

import importlib
import math  # noqa: F401  (names the FX code may use)
import operator  # noqa: F401
import sys
from pathlib import Path

import torch
from torch import device, inf, nan  # noqa: F401

import torch_trt_ref
from torch_trt_ref import accuracy

SETTINGS = {settings!r}
# Converters registered over the built-in ones when the failure was found:
# (module, function, op, priority, supports dynamic shapes)
USER_CONVERTERS = {user!r}


class Repro(torch.nn.Module):
    """The subgraph in the compile precision."""

    def __init__(self, weights):
        super().__init__()
        for name, value in weights.items():
            self.register_buffer(name, value)
{forward}

class Repro64(Repro):
    """The same subgraph in float64 (its explicit float dtypes name float64)."""
{forward64}

def registry():
    reg = torch_trt_ref.CONVERTERS.copy()
    for module, name, op, priority, dynamic in USER_CONVERTERS:
        fn = getattr(importlib.import_module(module), name)
        target = eval("torch.ops." + op)
        torch_trt_ref.converter(target, priority=priority, dynamic=dynamic, registry=reg)(fn)
    return reg


def main() -> int:
    data = torch.load(Path(__file__).with_suffix(".pt"))
    model = Repro(data["weights"]).eval()
    model64 = Repro64({{k: v.double() if v.is_floating_point() else v
                        for k, v in data["weights"].items()}}).eval()
    compiled = torch_trt_ref.compile(model, data["inputs"], registry=registry(),
                                     min_block_size=1, **SETTINGS)
    with torch.no_grad():
        verdict = accuracy.judge(compiled(*data["inputs"]), model(*data["inputs"]),
                                 model64(*data["inputs64"]))
    for out in verdict.outputs:
        print(f"output {{out.index}}: RMSE vs float64 {{out.compiled_rmse:.3g}} (allowed "
              f"{{out.allowed_rmse:.3g}}, eager {{out.eager_rmse:.3g}}), max abs error "
              f"{{out.compiled_max_abs:.3g}} (eager {{out.eager_max_abs:.3g}})")
    print("FAILS: " + verdict.message if not verdict.passed else "passes the float64 rule")
    return 0 if verdict.passed else 1


if __name__ == "__main__":
    sys.exit(main())
'''


def _forward(gm: torch.fx.GraphModule) -> str:
    code = gm.graph.python_code("self").src.strip("\n")
    lines = [line.rstrip() for line in code.splitlines()]
    return "\n" + textwrap.indent("\n".join(lines).strip("\n"), "    ") + "\n"


def user_converters(t, names: list[str]) -> tuple[list[tuple], list[str]]:
    """The converters of ``names`` that are not built in, as importable references."""
    nodes = {n.name: n for n in t.gm.graph.nodes}
    found, notes = [], []
    for name in names:
        node = nodes[name]
        support, _ = t.registry.select(node, t.settings)
        if support is None or support in CONVERTERS.candidates(node.target):
            continue
        fn = support.implementation
        ref = (fn.__module__, fn.__qualname__, op_name(node.target), support.priority,
               support.supports_dynamic_shapes)
        if "<locals>" in fn.__qualname__ or fn.__module__ == "__main__":
            notes.append(f"converter {fn.__module__}:{fn.__qualname__} of {name} cannot be "
                         "imported by the repro; define it at module level")
        elif ref not in found:
            found.append(ref)
    return found, notes


def write_repro(out_dir: Path, cand, t, verdict: accuracy.Verdict) -> Path:
    """Write ``out_dir/repro.py`` and ``out_dir/repro.pt``; returns the script's path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    script = out_dir / "repro.py"
    weights = {name: value for name, value in cand.module.named_buffers()}
    torch.save({"weights": weights, "inputs": cand.inputs, "inputs64": cand.inputs64},
               script.with_suffix(".pt"))
    defaults = settings_json(CompilationSettings())
    settings = {k: v for k, v in t.report.settings.items() if k not in _SKIPPED_SETTINGS
                and (k == "precision" or v != defaults.get(k))}
    user, notes = user_converters(t, cand.nodes)
    message = verdict.message or "passes"
    if notes:
        message += ". " + "; ".join(notes)
    script.write_text(_TEMPLATE.format(
        count=len(cand.nodes), nodes=", ".join(cand.nodes), message=message,
        script=script.name, settings=settings, user=user, forward=_forward(cand.module),
        forward64=_forward(cast_graph(cand.module))))
    return script
