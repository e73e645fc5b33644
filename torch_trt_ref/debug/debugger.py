"""``Debugger``: a context (the peer's ``torch_tensorrt.dynamo.Debugger``) that writes what
the compiles and runs inside it did: the FX graph before and after chosen lowering passes,
each engine's layer table, and the reference executor's time per layer. It listens on the
hooks of ``torch_trt_ref.observe``; the divergence finder (``compare``, ``reduce``) is the
other half of debugging (docs/debugging.md)."""

from __future__ import annotations

import json
import os
import statistics
from pathlib import Path
from typing import Any, Iterable

from ..lowering.pipeline import PASSES, SEGMENT_PASSES
from ..observe import observing

# what the code torch.fx generates refers to, so a graph file runs as written
_PRELUDE = ("import torch\nimport torch.fx._pytree as fx_pytree\n"
            "import torch.utils._pytree as pytree\nfrom torch import device\n"
            "inf, nan = float('inf'), float('nan')\n")
PASS_NAMES = tuple(dict.fromkeys(p.__name__ for p in [*PASSES, *SEGMENT_PASSES]))


class Debugger:
    """``with Debugger(capture_fx_graph_before=["cast_precision"], save_layer_info=True,
    logging_dir="dbg"):`` compile and run as usual; inside ``logging_dir``:

    - ``compile_<k>/lowering/<n>_<pass>_before.py`` and ``..._after.py``: the FX graph
      (as Python) around each run of a named pass (``PASS_NAMES``; the segment passes run
      once per TensorRT segment, so ``<n>`` counts the runs);
    - ``compile_<k>/engines/<engine>.layers.txt`` and ``.json`` (``save_layer_info``):
      each layer's name, kind, inputs and outputs with TensorRT's shapes and dtypes;
    - ``layer_timing.txt`` and ``.json`` (``time_layers``, default on with
      ``save_layer_info``), written on exit: wall seconds per layer of every engine the
      reference executor ran, summed over calls (replay is eager while timing: no CUDA
      graph). ``layer_times`` holds the same data."""

    def __init__(self, capture_fx_graph_before: Iterable[str] = (),
                 capture_fx_graph_after: Iterable[str] = (), save_layer_info: bool = False,
                 logging_dir: str | os.PathLike = "torch_trt_ref_debug",
                 time_layers: bool | None = None):
        self.before = _pass_names(capture_fx_graph_before, "capture_fx_graph_before")
        self.after = _pass_names(capture_fx_graph_after, "capture_fx_graph_after")
        self.save_layer_info = bool(save_layer_info)
        self.times_layers = self.save_layer_info if time_layers is None else bool(time_layers)
        self.dir = Path(logging_dir)
        if self.dir.exists() and not self.dir.is_dir():
            raise ValueError(f"logging_dir={str(self.dir)!r} is a file; give a directory (it "
                             "is created when missing)")
        self.compiles = 0
        self.files: list[Path] = []
        # engine -> layer -> {"kind", "calls", "seconds"}
        self.layer_times: dict[str, dict[str, dict[str, Any]]] = {}
        self._runs: dict[str, int] = {}
        self._context = None

    # -- the context --------------------------------------------------------------------
    def __enter__(self) -> Debugger:
        self.dir.mkdir(parents=True, exist_ok=True)
        self._context = observing(self)
        self._context.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._context.__exit__(*exc)
        if self.layer_times:
            self._write_timing()

    # -- the hooks (torch_trt_ref.observe) -------------------------------------------------
    def compile_started(self) -> None:
        self.compiles += 1
        self._runs = {}

    def lowering_pass(self, name: str, when: str, gm) -> None:
        if name not in (self.before if when == "before" else self.after):
            return
        run = self._runs.get(name, 0) + (when == "before" or name not in self.before)
        self._runs[name] = run
        code = gm.graph.python_code(root_module="self").src
        self._write(f"lowering/{run}_{name}_{when}.py",
                    f"# FX graph {when} lowering pass {name} (run {run}): forward(self, ...)"
                    f" with self the graph's module\n{_PRELUDE}{code}")

    def engine_built(self, name: str, engine) -> None:
        if not self.save_layer_info:
            return
        rows = [{"index": i, "name": layer.name, "kind": layer.kind,
                 "inputs": list(layer.inputs),
                 "outputs": [{"name": o.name, "shape": list(o.shape), "dtype": str(o.dtype)}
                             for o in layer.outputs]}
                for i, layer in enumerate(engine.snapshot.layers)]
        self._write(f"engines/{name}.layers.json", json.dumps(rows, indent=1))
        lines = [f"{name}: {len(rows)} layers (index, kind, name, outputs: shape dtype)"]
        lines += [f"{r['index']:4d}  {r['kind']:<18} {r['name']}  -> " + ", ".join(
            f"{tuple(o['shape'])} {o['dtype'].replace('torch.', '')}" for o in r["outputs"])
            for r in rows]
        self._write(f"engines/{name}.layers.txt", "\n".join(lines) + "\n")

    def layer_timed(self, engine: str, layer: str, kind: str, seconds: float) -> None:
        entry = self.layer_times.setdefault(engine, {}).setdefault(
            layer, {"kind": kind, "calls": 0, "seconds": 0.0, "samples": []})
        entry["calls"] += 1
        entry["seconds"] += seconds
        entry["samples"].append(seconds)

    # -- files ----------------------------------------------------------------------------
    def _write(self, relative: str, text: str) -> None:
        path = self.dir / f"compile_{self.compiles}" / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        self.files.append(path)

    def _write_timing(self) -> None:
        data = {engine: {layer: {k: v for k, v in e.items() if k != "samples"}
                         | {"median_seconds": statistics.median(e["samples"])}
                         for layer, e in layers.items()}
                for engine, layers in self.layer_times.items()}
        (self.dir / "layer_timing.json").write_text(json.dumps(data, indent=1))
        lines = []
        for engine, layers in data.items():
            total = sum(e["seconds"] for e in layers.values()) or 1.0
            lines.append(f"{engine}: {len(layers)} layers, {total:.6f} s over all calls")
            for layer, e in sorted(layers.items(), key=lambda kv: -kv[1]["seconds"]):
                lines.append(f"  {100 * e['seconds'] / total:5.1f}%  {e['seconds']:.6f} s  "
                             f"{e['calls']} calls  {e['kind']:<18} {layer}")
        (self.dir / "layer_timing.txt").write_text("\n".join(lines) + "\n")
        self.files += [self.dir / "layer_timing.json", self.dir / "layer_timing.txt"]


def _pass_names(names: Iterable[str], what: str) -> frozenset[str]:
    names = [names] if isinstance(names, str) else list(names)
    unknown = [n for n in names if n not in PASS_NAMES]
    if unknown:
        raise ValueError(f"{what}: unknown lowering pass(es) {unknown}; the passes are "
                         f"{list(PASS_NAMES)}")
    return frozenset(names)
