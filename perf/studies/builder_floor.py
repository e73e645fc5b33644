"""``python -m perf.studies.builder_floor``: peak RSS of the TensorRT builder alone (the
builder call in ``engine_cache.stream_plan``, above the RSS just before it) for chains of
3x3 convolutions with few and many weights, and for the small zoo models. Each network is
built twice in one process after a warm-up build, so library loading is not counted.

The builder's peak has a floor of ~130 MiB, however small the weights: a peak-RSS target of
2x the weights cannot be met by a model whose weights are under ~65 MiB (resnet18: 45 MiB;
mobilenet_v2: 13.5 MiB; the 2-layer BERT and GPT-2). Writes perf-data/results/
builder_floor.json."""

from __future__ import annotations

import ctypes
import gc
import json
import sys
from pathlib import Path

import torch

import torch_trt_ref
from torch_trt_ref import engine_cache
from torch_trt_ref.memory import PeakRSS

MiB = 2**20
OUT = Path(__file__).resolve().parents[2] / "perf-data" / "results" / "builder_floor.json"


def conv_chain(layers: int, channels: int) -> torch.nn.Module:
    blocks = [torch.nn.Conv2d(3, channels, 3, padding=1)]
    for _ in range(layers):
        blocks += [torch.nn.Conv2d(channels, channels, 3, padding=1),
                   torch.nn.BatchNorm2d(channels), torch.nn.ReLU()]
    return torch.nn.Sequential(*blocks).eval()


class BuildPeaks:
    """Wraps engine_cache.stream_plan to record the builder's peak RSS per build."""

    def __init__(self):
        self.peaks: list[int] = []
        self._build = engine_cache.stream_plan
        self._trim = getattr(ctypes.CDLL(None), "malloc_trim", None)

    def __enter__(self) -> "BuildPeaks":
        def measured(builder, net, config, file, weight_bytes=None):
            gc.collect()
            if self._trim is not None:  # return freed heap, so the baseline is honest
                self._trim(0)
            with PeakRSS() as rss:
                writer = self._build(builder, net, config, file, weight_bytes)
            self.peaks.append(rss.above_baseline)
            return writer

        engine_cache.stream_plan = measured
        return self

    def __exit__(self, *exc) -> None:
        engine_cache.stream_plan = self._build


def main() -> int:
    from zoo.registry import get

    def chain(layers, channels):
        return conv_chain(layers, channels), ((torch.randn(1, 3, 56, 56),), {})

    def zoo_model(name):
        entry = get(name)
        return entry.factory().eval(), entry.inputs()

    cases = {"conv chain 5x64": chain(5, 64), "conv chain 20x64": chain(20, 64),
             "conv chain 5x256": chain(5, 256), "conv chain 20x256": chain(20, 256),
             **{name: zoo_model(name) for name in ("resnet18", "mobilenet_v2", "bert_2layer",
                                                   "gpt2_2layer")}}
    rows = []
    with BuildPeaks() as peaks:
        torch_trt_ref.compile(conv_chain(1, 4), [torch.randn(1, 3, 8, 8)])  # warm-up
        for name, (model, (args, kwargs)) in cases.items():
            unique = {t.data_ptr(): t for t in model.state_dict().values()}  # tied: once
            weights = sum(t.numel() * t.element_size() for t in unique.values())
            builds = []
            for _ in range(2):
                compiled = torch_trt_ref.compile(model, args, kwargs)
                builds.append(peaks.peaks[-1])
            plan = sum(e.plan_bytes for e in compiled.compile_report.engines)
            rows.append({"network": name, "weight_bytes": weights, "plan_bytes": plan,
                         "builder_peak_bytes": builds})
            print(f"{name:18s} weights {weights / MiB:7.1f} MiB  plan {plan / MiB:7.1f} MiB  "
                  f"builder peak {' / '.join(f'{b / MiB:.0f}' for b in builds)} MiB  "
                  f"({min(builds) / weights:.1f}x the weights)", flush=True)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"backend": torch_trt_ref._trt.BACKEND, "rows": rows}, indent=1)
                   + "\n")
    print(f"wrote {OUT}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
