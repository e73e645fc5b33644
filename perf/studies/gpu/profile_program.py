"""Kernel table of one saved zoo program on a GPU (issue 27): where the reference
executor's GPU time goes, beside eager in the same precision. Usage:
python perf/studies/gpu/profile_program.py PROGRAM.prog [ROWS]"""

from __future__ import annotations

import copy
import sys
import warnings
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

import torch_trt_ref
from torch_trt_ref.runtime import cuda_graphs
from torch_trt_ref.settings import PRECISION_DTYPES
from zoo import gpu_latency, weightless


def main(path: str, rows: int = 25) -> None:
    side = gpu_latency.json.loads(Path(path).with_suffix(".json").read_text())
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        model = gpu_latency.get(side["model"]).factory()
        compiled = torch_trt_ref.load(path)
        if side.get("weights") is False:  # saved without engine weights (zoo/weightless.py)
            weightless.restore(compiled, model)
        compiled, model = compiled.cuda(), model.cuda()
        args, kwargs = gpu_latency.batched_inputs(side["model"], side["batch"])
        args, kwargs = gpu_latency._to(args, "cuda"), gpu_latency._to(kwargs, "cuda")
        dtype = PRECISION_DTYPES[side["precision"]]
        low = copy.deepcopy(model).to(dtype)
        low_args = gpu_latency._to(args, "cuda", dtype)
        with torch.no_grad():
            for label, fn in (("ours (no graphs)", lambda: compiled(*args, **kwargs)),
                              ("eager", lambda: low(*low_args, **kwargs))):
                with cuda_graphs.cuda_graphs(False):
                    for _ in range(3):
                        fn()
                    torch.cuda.synchronize()
                    with profile(activities=[ProfilerActivity.CUDA]) as prof:
                        for _ in range(5):
                            fn()
                        torch.cuda.synchronize()
                print(f"== {Path(path).name}: {label}, 5 calls")
                print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=rows))
            with cuda_graphs.cuda_graphs(True):
                for _ in range(3):
                    compiled(*args, **kwargs)
    for w in seen:
        print("warning:", str(w.message)[:300])
    for name, m in compiled.named_modules():
        runner = getattr(getattr(m, "handle", None), "_reference", None)
        if runner is not None:
            print(name, "graphs:", {str(k[0][0]) if k else "": v is not None
                                    for k, v in runner.graphs.replays.items()})


if __name__ == "__main__":
    main(sys.argv[1], *(int(a) for a in sys.argv[2:]))
