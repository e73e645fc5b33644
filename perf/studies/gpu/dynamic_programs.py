"""Dynamic-shape programs on a GPU (issue 27): zoo models compiled here with a dynamic
batch dim and saved without engine weights (``zoo/weightless.py``); on the GPU machine,
loaded, refit from the zoo model rebuilt from its seed, and run at several batch sizes
inside the profile: outputs judged against eager on the GPU by the float64 rule, with CUDA
graphs per size (one capture per size, the bounded cache evicting the oldest), and timed.

    python perf/studies/gpu/dynamic_programs.py save DIR     # here (compiles: torch >= 2.14)
    python perf/studies/gpu/dynamic_programs.py check DIR    # on the GPU machine"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

import torch

import torch_trt_ref
from torch_trt_ref.runtime import cuda_graphs
from torch_trt_ref.settings import PRECISION_DTYPES
from zoo import gpu_latency, measure, weightless
from zoo.registry import get

# (model, precision, (min, opt, max) batch, batch sizes checked on the GPU)
PROGRAMS = (("bert_2layer", "fp32", (1, 8, 16), (1, 5, 16)),
            ("resnet18", "fp16", (1, 4, 8), (1, 3, 8)))


def _spec(x: torch.Tensor, batches, entry) -> torch_trt_ref.Input:
    low, _, high = batches
    rest = tuple(x.shape[1:])
    extra = {}
    if not x.is_floating_point():  # token ids: keep them inside the vocabulary
        (dyn,) = entry.dynamic[0]
        extra = {"low": dyn.low, "high": dyn.high}
    return torch_trt_ref.Input(min_shape=(low, *rest), opt_shape=(batches[1], *rest),
                               max_shape=(high, *rest), dtype=x.dtype, **extra)


def save(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name, precision, batches, sizes in PROGRAMS:
        entry = get(name)
        model = entry.factory()
        (x,), _ = gpu_latency.batched_inputs(name, batches[1])
        compiled = torch_trt_ref.compile(model, [_spec(x, batches, entry)],
                                         partitioner="fast", precision=precision)
        with torch.no_grad():  # the program runs at every size on this CPU too
            for b in sizes:
                (xb,), _ = gpu_latency.batched_inputs(name, b)
                compiled(xb)
        weightless.strip(compiled, model)
        stem = out / f"{name}-{precision}-dyn"
        torch_trt_ref.save(compiled, stem.with_suffix(".prog"), plans=False)
        stem.with_suffix(".json").write_text(json.dumps(
            {"model": name, "precision": precision, "batches": batches, "sizes": sizes}))
        print(f"saved {stem.name}.prog: {stem.with_suffix('.prog').stat().st_size} bytes")


def check(folder: Path, out: Path, device: str = "cuda") -> bool:
    """Each program at each size; on a CPU (a dry run of this check) graphs stay off."""
    records, ok = [], True
    for path in sorted(folder.glob("*-dyn.prog")):
        side = json.loads(path.with_suffix(".json").read_text())
        entry, dtype = get(side["model"]), PRECISION_DTYPES[side["precision"]]
        model = entry.factory()
        compiled = weightless.restore(torch_trt_ref.load(path), model).to(device)
        model = model.to(device)
        for size in side["sizes"]:
            (x,), _ = gpu_latency.batched_inputs(side["model"], size)
            x = x.to(device)
            with torch.no_grad(), cuda_graphs.cuda_graphs(True):
                reference = model(x)
                got = compiled(x)
                again = compiled(x)  # a replay of the graph captured by the first call
            eager, eager64, notes = measure.references(model, (x,), {}, dtype, reference)
            rule = measure.float64_rule(got, eager, eager64, measure.accuracy(
                reference, got)["max_abs_error"], entry.tolerance(side["precision"]), notes)
            replayed = all(torch.equal(a, b) for a, b in
                           zip(measure.tensors(got), measure.tensors(again)))
            lat = gpu_latency.cuda_latency(lambda: compiled(x), 10, 50) \
                if device == "cuda" else {"median_ms": None}  # noqa: B023
            runners = [r for _, r in gpu_latency._runners(compiled)]
            graphs = [len(r.graphs.replays) for r in runners]
            record = {"program": path.name, "batch": size, "passed": rule["passed"],
                      "ratio": rule["ratio"], "replay_equal": replayed,
                      "graphs_per_engine": graphs, "median_ms": lat["median_ms"]}
            ok = ok and rule["passed"] and replayed
            print(json.dumps(record), flush=True)
            records.append(record)
        # the bounded cache: at most 2 graphs per engine, the oldest size goes
        cuda_graphs.set_cuda_graphs(compiled, True, cache_size=2)
        with torch.no_grad():
            for size in side["sizes"]:
                (x,), _ = gpu_latency.batched_inputs(side["model"], size)
                compiled(x.to(device))
        kept = [[k[0][0][0] for k in r.graphs.replays] for r in runners]
        bounded = all(len(k) <= 2 for k in kept) and (device != "cuda" or all(kept))
        print(json.dumps({"program": path.name, "cache_size_2_kept_batches": kept,
                          "bounded": bounded}), flush=True)
        ok = ok and bounded
        records.append({"program": path.name, "cache_size_2_kept_batches": kept})
    env = gpu_latency.environment(device)
    out.write_text("\n".join(json.dumps({**r, "env": env}) for r in records) + "\n")
    return ok


if __name__ == "__main__":
    warnings.simplefilter("ignore")
    if sys.argv[1] == "save":
        save(Path(sys.argv[2]))
    else:
        sys.exit(0 if check(Path(sys.argv[2]), Path(sys.argv[3]), *sys.argv[4:]) else 1)
