"""Run by tests/test_plugin.py in a fresh process. ``compile OUT``: in a plain process (the
import shim opens libtensorrt_rtx.so through its folder of links: Note [TensorRT for RTX
through a folder of links]), compile the models of
plugin_example_ops.py with plugin converters, save one program and write what happened
(JSON) and the tensors to compare; ``load OUT``: load the program in a process that never
imported the ops and run it on the saved input."""

import json
import sys
from pathlib import Path

import torch

import torch_trt_ref
from torch_trt_ref import Input
from torch_trt_ref.accuracy import judge
from torch_trt_ref.conversion import plugin
from torch_trt_ref.conversion.plugin import library_on_search_path


def _kinds(module):
    return [layer.kind for m in module.modules() if hasattr(m, "engine")
            for layer in m.engine.snapshot.layers]


def _plugin_layers(module):
    return [layer for m in module.modules() if hasattr(m, "engine")
            for layer in m.engine.snapshot.layers if layer.kind == "PLUGIN_V3"]


def _verdict(module, model, *xs):
    with torch.no_grad():
        return judge(module(*xs), model(*xs), model(*(x.double() for x in xs))).passed


def compile_all(out: Path) -> dict:
    import plugin_example_ops as ops

    facts = {"library": library_on_search_path()}
    support = plugin("ttr_plugin_example::topk_gather")
    facts["same_support_twice"] = plugin("ttr_plugin_example::topk_gather") is support
    for name in ("sorted_and_scaled", "doubled_rows"):
        plugin(f"ttr_plugin_example::{name}")

    model, x = ops.TopK().eval(), torch.randn(4, 8, generator=torch.Generator().manual_seed(0))
    static = torch_trt_ref.compile(model, [x], min_block_size=1)
    facts["static"] = {"counts": static.compile_report.partition["counts"],
                       "kinds": _kinds(static), "passed": _verdict(static, model, x),
                       "converters": [e.converters for e in static.compile_report.engines]}
    layer = _plugin_layers(static)[0]
    facts["static"]["layer"] = {"op": layer.attrs["op"], "module": layer.attrs["module"],
                                "shape": list(layer.outputs[0].shape)}

    spec = Input(min_shape=(1, 8), opt_shape=(4, 8), max_shape=(8, 8))
    dynamic = torch_trt_ref.compile(model, [spec], min_block_size=1)
    facts["dynamic"] = {"counts": dynamic.compile_report.partition["counts"],
                        "shape": list(_plugin_layers(dynamic)[0].outputs[0].shape),
                        "passed": [_verdict(dynamic, model, torch.randn(b, 8))
                                   for b in (1, 5, 8)]}
    torch_trt_ref.save(dynamic, out / "dynamic.trtref")
    cached = [torch_trt_ref.compile(model, [x], min_block_size=1,
                                    engine_cache_dir=str(out / "cache")) for _ in range(2)]
    facts["cache"] = {"hits": [[e.cache_hit for e in c.compile_report.engines] for c in cached],
                      "equal": torch.equal(cached[1](x), static(x)),
                      "kinds": _kinds(cached[1])}
    xs = torch.randn(6, 8, generator=torch.Generator().manual_seed(6))
    torch.save({"x": xs, "out": dynamic(xs)}, out / "expected.pt")

    two, a, b = ops.Two().eval(), torch.randn(3, 6), torch.randn(3, 6)
    compiled = torch_trt_ref.compile(two, [a, b], min_block_size=1)
    facts["two"] = {"counts": compiled.compile_report.partition["counts"],
                    "plugins": len(_plugin_layers(compiled)),
                    "outputs": [len(p.outputs) for p in _plugin_layers(compiled)],
                    "passed": _verdict(compiled, two, a, b)}

    half = torch_trt_ref.compile(model, [x], precision="fp16", min_block_size=1)
    with torch.no_grad():
        verdict = judge(half(x), model(x.half()).float(), model(x.double()))
    facts["fp16"] = {"dtypes": [str(o.dtype) for p in _plugin_layers(half) for o in p.outputs],
                     "passed": verdict.passed, "message": verdict.message}

    doubled, d = ops.Doubled().eval(), torch.randn(3, 4)
    compiled = torch_trt_ref.compile(
        doubled, [Input(min_shape=(1, 4), opt_shape=(3, 4), max_shape=(6, 4))],
        min_block_size=1)
    facts["doubled"] = {"rejected": compiled.compile_report.partition["rejected"],
                        "passed": _verdict(compiled, doubled, d)}
    return facts


def load(out: Path) -> dict:
    before = hasattr(torch.ops.ttr_plugin_example, "topk_gather")
    module = torch_trt_ref.load(out / "dynamic.trtref")
    expected = torch.load(out / "expected.pt")
    got = module(expected["x"])
    return {"registered_before": before, "equal": torch.equal(got, expected["out"]),
            "imported": "plugin_example_ops" in sys.modules}


if __name__ == "__main__":
    mode, folder = sys.argv[1], Path(sys.argv[2])
    facts = compile_all(folder) if mode == "compile" else load(folder)
    (folder / f"{mode}.json").write_text(json.dumps(facts, default=str))
