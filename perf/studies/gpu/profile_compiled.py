"""Kernels of the inductor replay (Note [Compiled replay]) against torch.compile's default
mode of the same model (the kernels reduce-overhead replays), for saved zoo programs on a
GPU (issue 42: BERT-base fp32 batch 1 at 1.08x reduce-overhead): kernels per call, GPU
time per call and the top kernels of each, the graphs dynamo made of each engine's replay,
then CUDA-graph latency of both (3 rounds).
Usage: python perf/studies/gpu/profile_compiled.py PROGRAM.prog... ($OUT/compiled_*.txt)"""

from __future__ import annotations

import os
import statistics
import sys
import warnings
from pathlib import Path

import torch

from torch_trt_ref.runtime import cuda_graphs

sys.path.insert(0, str(Path(__file__).parent))
import profile_replay as pr  # noqa: E402


def main(paths: list[str]) -> None:
    out_dir = Path(os.environ.get("OUT", "out"))
    out_dir.mkdir(parents=True, exist_ok=True)
    warnings.simplefilter("ignore")
    for path in paths:
        name = Path(path).stem
        out = open(out_dir / f"compiled_{name}.txt", "w")
        side, compiled, (args, kwargs), low, (la, lk) = pr.load(path)
        cuda_graphs.set_cuda_graphs(compiled, True, replay="inductor")
        ours = lambda: compiled(*args, **kwargs)  # noqa: E731
        torch._dynamo.utils.counters.clear()
        with cuda_graphs.cuda_graphs(False), torch.no_grad():
            ours()
            ours()
        line = (f"#### {name}: dynamo graphs {dict(torch._dynamo.utils.counters['stats'])}, "
                f"breaks {dict(torch._dynamo.utils.counters['graph_break'])}")
        print(line, flush=True)
        out.write(line + "\n")
        with cuda_graphs.cuda_graphs(False):
            pr.kernels(ours, "ours inductor replay", 40, out)
        ind = torch.compile(low)
        pr.kernels(lambda: ind(*la, **lk), "inductor default", 40, out)
        results = {}
        with cuda_graphs.cuda_graphs(True):
            results["ours inductor replay"] = pr.graph_ms(ours)
        ro = torch.compile(low, mode="reduce-overhead")
        with torch.no_grad():
            for _ in range(3):
                ro(*la, **lk)
        results["reduce-overhead"] = pr.graph_ms(lambda: ro(*la, **lk))
        for k, v in results.items():
            line = f"{name} {k:24s} {statistics.median(v):.3f} ms ({min(v):.3f}-{max(v):.3f})"
            print(line, flush=True)
            out.write(line + "\n")
        out.close()
        torch._dynamo.reset()


if __name__ == "__main__":
    main(sys.argv[1:])
