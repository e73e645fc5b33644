"""Where the graphed reference executor's GPU time goes against
``torch.compile(mode="reduce-overhead")`` (issue 42), for saved zoo programs on a GPU:
kernels per call and GPU time per call of ours (prepared replay) and of inductor (default
mode, the kernels reduce-overhead replays), then graph-replay latency of ours as it is, ours
with ``cudnn.benchmark``, ours with conv weights prepared once (reshaped, cast,
channels_last), ours with the prepared replay compiled by inductor, and reduce-overhead.
Usage: python perf/studies/gpu/profile_replay.py PROGRAM.prog...
(prints tables; $OUT/profile_*.txt)"""

from __future__ import annotations

import copy
import json
import os
import statistics
import sys
import time
import warnings
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

import torch_trt_ref
from torch_trt_ref.runtime import cuda_graphs
from torch_trt_ref.settings import PRECISION_DTYPES
from zoo import gpu_latency, weightless


def load(path: str):
    side = json.loads(Path(path).with_suffix(".json").read_text())
    model = gpu_latency.get(side["model"]).factory()
    compiled = torch_trt_ref.load(path)
    if side.get("weights") is False:
        weightless.restore(compiled, model)
    compiled, model = compiled.cuda(), model.cuda()
    args, kwargs = gpu_latency.batched_inputs(side["model"], side["batch"])
    args, kwargs = gpu_latency._to(args, "cuda"), gpu_latency._to(kwargs, "cuda")
    dtype = PRECISION_DTYPES[side["precision"]]
    low = copy.deepcopy(model).to(dtype)
    low_args, low_kwargs = gpu_latency._to(args, "cuda", dtype), gpu_latency._to(kwargs, "cuda",
                                                                                 dtype)
    return side, compiled, (args, kwargs), low, (low_args, low_kwargs)


def kernels(fn, label: str, rows: int, out) -> None:
    """Kernel launches and summed kernel time per call (no graphs), and the top kernels."""
    with torch.no_grad():
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(5):
                fn()
            torch.cuda.synchronize()
    events = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    total = sum(e.device_time for e in events) / 5 / 1000
    line = f"== {label}: {len(events) / 5:.0f} kernels per call, {total:.3f} ms GPU per call"
    print(line, flush=True)
    out.write(line + "\n" + prof.key_averages().table(sort_by="cuda_time_total",
                                                      row_limit=rows) + "\n")


def graph_ms(fn, rounds: int = 3, warm: int = 20, runs: int = 100) -> list[float]:
    res = []
    with torch.no_grad():
        for _ in range(rounds):
            res.append(gpu_latency.cuda_latency(fn, warm, runs)["median_ms"])
    return res


def runners(compiled):
    return [r for _n, r in gpu_latency._runners(compiled)]


def prepare_conv_weights(compiled) -> int:
    """Each CONVOLUTION kernel reshaped, cast to the layer's output dtype and made
    channels_last once (the prototype of a prepared conv)."""
    n = 0
    for r in runners(compiled):
        for layer in r.snapshot.layers:
            if layer.kind == "CONVOLUTION" and layer.attrs.get("kernel") is not None:
                k = layer.attrs["kernel"]
                ks = layer.attrs["kernel_size_nd"]
                out_maps = layer.attrs["num_output_maps"]
                cin = k.numel() // (out_maps * int(torch.tensor(ks).prod()))
                w = k.reshape(out_maps, cin, *ks).to(layer.outputs[0].dtype)
                if len(ks) == 2:
                    w = w.contiguous(memory_format=torch.channels_last)
                layer.attrs["kernel"] = w
                b = layer.attrs.get("bias")
                if isinstance(b, torch.Tensor) and b.numel():
                    layer.attrs["bias"] = b.to(layer.outputs[0].dtype)
                n += 1
        r.graphs.clear()
    return n


def compile_replays(compiled, mode: str | None):
    """Each engine's prepared replay compiled by inductor (the prototype)."""
    for r in runners(compiled):
        prepared = r.prepared

        def run(*inputs, prepared=prepared):
            return tuple(prepared.run(list(inputs), False))

        fast = torch.compile(run, dynamic=False, mode=mode)
        r.graphs.fn = lambda inputs, fast=fast: list(fast(*inputs))
        r.graphs.clear()


def plain_replays(compiled):
    for r in runners(compiled):
        r.graphs.fn = r._eager
        r.graphs.clear()


def main(paths: list[str]) -> None:
    out_dir = Path(os.environ.get("OUT", "out"))
    out_dir.mkdir(parents=True, exist_ok=True)
    torch.backends.cudnn.benchmark = False
    for path in paths:
        name = Path(path).stem
        out = open(out_dir / f"profile_{name}.txt", "w")
        warnings.simplefilter("ignore")
        side, compiled, (args, kwargs), low, (la, lk) = load(path)
        print(f"#### {name}", flush=True)
        for layer in runners(compiled)[0].snapshot.layers[:400]:
            if layer.kind == "CONVOLUTION":
                k = layer.attrs["kernel"]
                print("first conv kernel", k.dtype, tuple(k.shape), "->",
                      layer.outputs[0].dtype, flush=True)
                break
        print("layers per engine:", [len(r.snapshot.layers) for r in runners(compiled)],
              "prepared calls:", [len(r.prepared.fast) for r in runners(compiled)], flush=True)
        ours = lambda: compiled(*args, **kwargs)  # noqa: E731
        with cuda_graphs.cuda_graphs(False):
            kernels(ours, "ours prepared replay", 30, out)
        t = time.perf_counter()
        ind = torch.compile(low)
        with torch.no_grad():
            ind(*la, **lk)
        print(f"inductor default compile {time.perf_counter() - t:.1f} s", flush=True)
        kernels(lambda: ind(*la, **lk), "inductor default", 30, out)
        results = {}
        with cuda_graphs.cuda_graphs(True):
            results["ours"] = graph_ms(ours)
            torch.backends.cudnn.benchmark = True
            plain_replays(compiled)
            results["ours+cudnn.benchmark"] = graph_ms(ours)
            torch.backends.cudnn.benchmark = False
            print("convs prepared:", prepare_conv_weights(compiled), flush=True)
            results["ours+prepared convs"] = graph_ms(ours)
            with cuda_graphs.cuda_graphs(False):
                kernels(ours, "ours prepared convs", 30, out)
            torch.backends.cudnn.benchmark = True
            plain_replays(compiled)
            results["ours+prepared convs+benchmark"] = graph_ms(ours)
            torch.backends.cudnn.benchmark = False
            t = time.perf_counter()
            compile_replays(compiled, None)
            results["ours+inductor replay"] = graph_ms(ours)
            print(f"ours inductor replay compile+time {time.perf_counter() - t:.1f} s",
                  flush=True)
            torch.backends.cudnn.benchmark = True
            for r in runners(compiled):
                r.graphs.clear()
            results["ours+inductor replay+benchmark"] = graph_ms(ours)
            torch.backends.cudnn.benchmark = False
        t = time.perf_counter()
        ro = torch.compile(low, mode="reduce-overhead")
        with torch.no_grad():
            for _ in range(3):
                ro(*la, **lk)
        print(f"reduce-overhead compile {time.perf_counter() - t:.1f} s", flush=True)
        results["reduce-overhead"] = graph_ms(lambda: ro(*la, **lk))
        results["inductor default"] = graph_ms(lambda: ind(*la, **lk))
        ref = results["reduce-overhead"]
        for k, v in results.items():
            line = (f"{name} {k:34s} {statistics.median(v):.3f} ms ({min(v):.3f}-{max(v):.3f})"
                    f"  {statistics.median(v) / statistics.median(ref):.2f}x reduce-overhead")
            print(line, flush=True)
            out.write(line + "\n")
        out.close()
        torch._dynamo.reset()
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main(sys.argv[1:])
