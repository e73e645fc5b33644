"""Sweep: zoo models compiled with dynamic dims as users declare them (min = opt = 1) and
judged against eager float64 at min, opt, max and two random sizes between (Note [Tracing
dynamic dims] in capture.py). One subprocess per case; JSON lines on stdout.

    python -m perf.studies.declared_ranges_sweep [case ...]     # all cases when none is named

perf-data/results/declared_ranges_sweep.jsonl is the last full run (2 CPU cores, ~25 min).
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import time
import traceback

import torch

VISION = {"resnet18": 4, "mobilenet_v2": 4, "mobilenet_v3_small": 4, "efficientnet_b0": 4,
          "convnext_tiny": 2, "vit_b_16": 2, "swin_t": 2}
TEXT = ("bert_2layer", "gpt2_2layer", "llama_2layer", "qwen2_2layer")
SEQ2SEQ = ("t5_2layer", "bart_base")


def _cases() -> dict[str, tuple]:
    """case name -> (zoo model, which dim, (min, opt, max))."""
    cases = {}
    for name, hi in VISION.items():
        cases[f"{name}/batch1-{hi}"] = (name, "batch", (1, 1, hi))
    cases["resnet18/batch1-2"] = ("resnet18", "batch", (1, 1, 2))
    for name in TEXT:
        cases[f"{name}/seq1-64"] = (name, "seq", (1, 1, 64))
        cases[f"{name}/seq1-2"] = (name, "seq", (1, 1, 2))
    for name in ("bert_2layer", "gpt2_2layer"):
        cases[f"{name}/batch1-4"] = (name, "batch", (1, 1, 4))
    for name in SEQ2SEQ:
        cases[f"{name}/seq1-32"] = (name, "seq", (1, 1, 32))
        cases[f"{name}/seq1-2"] = (name, "seq", (1, 1, 2))
    return cases


def _specs(entry, dim: str, rng: tuple[int, int, int]):
    """Input specs and a function size -> example args for the declared dim."""
    from torch_trt_ref import Input

    args, _ = entry.inputs()
    lo, opt, hi = rng
    specs = []
    for a in args:
        d = 0 if dim == "batch" else 1
        shapes = [list(a.shape) for _ in range(3)]
        if dim == "batch" and a.dtype == torch.int64:
            shapes = [[s, 16] for s in (lo, opt, hi)]  # batch of 16-token sequences
        else:
            for s, v in zip(shapes, (lo, opt, hi)):
                s[d] = v
        kw = {"dtype": a.dtype}
        if a.dtype == torch.int64:
            kw["high"] = int(a.max()) + 1
        specs.append(Input(min_shape=shapes[0], opt_shape=shapes[1], max_shape=shapes[2],
                           **kw))

    def make(size: int, seed: int):
        g = torch.Generator().manual_seed(seed)
        out = []
        for s in specs:
            shape = list(s.opt_shape)
            shape[0 if dim == "batch" else 1] = size
            if s.dtype == torch.int64:
                out.append(torch.randint(0, int(s.high), shape, generator=g))
            else:
                out.append(torch.randn(shape, generator=g))
        return out
    return specs, make


def run_case(case: str) -> dict:
    import torch_trt_ref
    from torch_trt_ref.accuracy import judge
    from zoo.registry import get

    name, dim, rng = _cases()[case]
    entry = get(name)
    row = {"case": case, "model": name, "dim": dim, "range": rng}
    model = entry.factory()
    specs, make = _specs(entry, dim, rng)
    start = time.perf_counter()
    try:
        compiled = torch_trt_ref.compile(model, specs, **entry.compile_settings)
    except Exception as e:  # noqa: BLE001 - a sweep records every failure
        row.update(outcome="compile error", error=f"{type(e).__name__}: {e}"[:2000],
                   trace=traceback.format_exc()[-3000:])
        return row
    row["compile_s"] = round(time.perf_counter() - start, 1)
    report = compiled.compile_report
    row["counts"] = report.counts
    row["fallbacks"] = report.fallbacks
    row["size_branches"] = report.size_branches  # Note [Sizes the trace does not cover]
    row["untraced_sizes"] = report.untraced_sizes
    lo, opt, hi = rng
    g = torch.Generator().manual_seed(1)
    sizes = [lo, opt, hi] + [int(torch.randint(lo, hi + 1, (), generator=g)) for _ in range(2)]
    model64 = copy.deepcopy(model).double()
    checks = []
    for i, size in enumerate(sizes):
        args = make(size, i)
        args64 = [a.double() if a.is_floating_point() else a for a in args]
        try:
            with torch.no_grad():
                verdict = judge(compiled(*args), model(*args), model64(*args64))
            worst = max((o.compiled_max_abs for o in verdict.outputs), default=0.0)
            checks.append({"size": size, "passed": verdict.passed, "max_abs": worst,
                           "message": verdict.message[:500]})
        except Exception as e:  # noqa: BLE001
            checks.append({"size": size, "passed": False, "error":
                           f"{type(e).__name__}: {e}"[:1000]})
    row["checks"] = checks
    row["outcome"] = "pass" if all(c["passed"] for c in checks) else "FAIL"
    return row


def main(argv: list[str]) -> None:
    if len(argv) == 2 and argv[0] == "--one":
        print(json.dumps(run_case(argv[1])), flush=True)
        return
    for case in argv or list(_cases()):
        proc = subprocess.run([sys.executable, "-m", "perf.studies.declared_ranges_sweep", "--one",
                               case], capture_output=True, text=True, timeout=1800)
        line = (proc.stdout.strip().splitlines() or [""])[-1]
        if proc.returncode or not line.startswith("{"):
            line = json.dumps({"case": case, "outcome": "crash",
                               "error": proc.stderr[-2000:]})
        print(line, flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
