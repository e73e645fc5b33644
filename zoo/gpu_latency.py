"""Zoo programs saved on one machine and timed on another (issue 27): ``zoo save`` compiles
zoo models and writes each program (``torch_trt_ref.save``) with a sidecar JSON naming the
model, precision, batch and checksums of its inputs and weights; ``zoo latency`` loads them
(on a GPU machine, with or without TensorRT), checks each against eager there by the float64
rule, and times the reference executor (CUDA graphs off, per engine, whole module) beside
eager and torch.compile (inductor) of the same zoo model, with CUDA events: warm-up, then
median and p90. It writes JSON-lines records (``kind: "gpu_latency"``) and a markdown
table; ``zoo report`` reads the records."""

from __future__ import annotations

import argparse
import contextlib
import copy
import gc
import json
import platform
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Sequence

import torch

from torch_trt_ref.commands import number
from torch_trt_ref.llm.models import MODELS
from torch_trt_ref.settings import PARTITIONERS, PRECISION_DTYPES

from . import llm_latency, measure, weightless
from .cell import settings_for
from .matrix import Cell
from .registry import QUICK, get
from .schema import SCHEMA_VERSION

SIDE = ".json"
PROGRAM = ".prog"


def batched_inputs(name: str, batch: int) -> tuple[tuple, dict]:
    """The zoo entry's example inputs with their batch dim (dim 0) made ``batch``: float
    inputs drawn anew from a seeded generator, integer inputs repeated."""
    args, kwargs = get(name).inputs()
    if batch == 1:
        return args, kwargs
    g = torch.Generator().manual_seed(1)

    def grow(x):
        if not isinstance(x, torch.Tensor):
            return x
        if x.is_floating_point():
            return torch.randn((batch, *x.shape[1:]), generator=g, dtype=x.dtype)
        return x.repeat(batch, *([1] * (x.dim() - 1)))

    return tuple(grow(a) for a in args), {k: grow(v) for k, v in kwargs.items()}


def checksum(tensors) -> float:
    return float(sum(t.double().sum() for t in tensors if t.is_floating_point())
                 + sum(t.double().sum() for t in tensors if not t.is_floating_point()))


def program_name(model: str, precision: str, batch: int) -> str:
    return f"{model}-{precision}-b{batch}"


def save_programs(models: list[str], precisions: list[str], batches: list[int], out: Path,
                  strategy: str = "fast", plans: bool = True,
                  log: Callable[[str], None] = print, weights: bool = True) -> list[Path]:
    """Compile and save each model x precision x batch into ``out``; returns the paths.
    ``plans=False`` saves without TensorRT plans (reference executor only, half the size);
    ``weights=False`` without the engine weights (``weightless.py``: refit on load)."""
    import torch_trt_ref

    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name in models:
        entry = get(name)
        for precision in precisions:
            for batch in batches:
                model = entry.factory()
                args, kwargs = batched_inputs(name, batch)
                cell = Cell(name, strategy, precision)
                settings = settings_for(cell, entry.weight_bytes(model), entry.compile_settings)
                start = time.perf_counter()
                compiled = torch_trt_ref.compile(model, args, kwargs, **settings)
                stem = out / program_name(name, precision, batch)
                if not weights:
                    weightless.strip(compiled, model)
                torch_trt_ref.save(compiled, stem.with_suffix(PROGRAM), plans=plans)
                side = {"model": name, "precision": precision, "batch": batch,
                        "strategy": strategy, "plans": plans, "weights": weights,
                        "settings": {k: str(v) for k, v in settings.items()},
                        "inputs_checksum": checksum(_leaves(args, kwargs)),
                        "weights_checksum": checksum(model.state_dict().values()),
                        "compile_seconds": time.perf_counter() - start,
                        "torch": torch.__version__}
                stem.with_suffix(SIDE).write_text(json.dumps(side, indent=1))
                size = stem.with_suffix(PROGRAM).stat().st_size
                log(f"saved {stem.name}{PROGRAM}: {size / 2**20:.1f} MiB, "
                    f"{side['compile_seconds']:.0f} s")
                written.append(stem.with_suffix(PROGRAM))
                del compiled, model
                gc.collect()
    return written


def _leaves(args, kwargs) -> list[torch.Tensor]:
    return [x for x in [*args, *kwargs.values()] if isinstance(x, torch.Tensor)]


def cuda_latency(fn: Callable[[], Any], warmup: int, runs: int) -> dict[str, Any]:
    """CUDA-event time of ``fn`` (launches and GPU work of one call): ``warmup`` untimed
    calls, then ``runs`` timed ones; milliseconds."""
    with torch.no_grad():
        for _ in range(warmup):
            fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(runs):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
    return {"warmup": warmup, "runs": runs, "median_ms": statistics.median(times),
            "p90_ms": measure.percentile(times, 0.9), "min_ms": min(times)}


def _to(value, device, dtype=None):
    return torch.utils._pytree.tree_map(
        lambda t: (t.to(device, dtype) if dtype is not None and t.is_floating_point()
                   else t.to(device)) if isinstance(t, torch.Tensor) else t, value)


def measure_program(path: Path, device: str, warmup: int, runs: int, anchors: Sequence[str],
                    log: Callable[[str], None] = print, repeats: int = 1,
                    gpu_lock=contextlib.nullcontext()) -> dict[str, Any]:
    """One record: the program checked against eager on ``device`` and timed beside eager
    and ``anchors`` (torch.compile modes, ``ANCHORS``) of the same zoo model; the rounds run
    holding ``gpu_lock`` (processes timing side by side take turns)."""
    import torch_trt_ref
    from torch_trt_ref.runtime import cuda_graphs

    side = json.loads(path.with_suffix(SIDE).read_text())
    record: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "kind": "gpu_latency",
                              "program": path.name, **side,
                              "device": device, "status": "ok", "env": environment(device)}
    stage = "load"
    caught = warnings.catch_warnings(record=True)
    seen = caught.__enter__()
    warnings.simplefilter("always")
    try:
        entry = get(side["model"])
        dtype = PRECISION_DTYPES[side["precision"]]
        model = entry.factory()
        args, kwargs = batched_inputs(side["model"], side["batch"])
        record["checksums_match"] = {
            "inputs": checksum(_leaves(args, kwargs)) == side["inputs_checksum"],
            "weights": checksum(model.state_dict().values()) == side["weights_checksum"]}
        compiled = torch_trt_ref.load(path)
        if side.get("weights") is False:  # saved without engine weights: refit from the model
            weightless.restore(compiled, model)
        compiled = compiled.to(device)
        record["executors"] = sorted(set(torch_trt_ref.executors_used(compiled).values()))
        model = model.to(device)
        args, kwargs = _to(args, device), _to(kwargs, device)
        stage = "accuracy"
        settings = cuda_graphs.set_cuda_graphs(compiled, True, replay="plain")
        with torch.no_grad(), cuda_graphs.cuda_graphs(False):
            reference = model(*args, **kwargs)
            result = compiled(*args, **kwargs)
            with cuda_graphs.cuda_graphs(True):
                graphed = compiled(*args, **kwargs)
                settings.replay = "inductor"  # compiled on this first call, then captured
                compiled(*args, **kwargs)
                graphed_inductor = compiled(*args, **kwargs)
                settings.replay = "plain"
        acc = measure.accuracy(reference, result)
        eager, eager64, notes = measure.references(model, args, kwargs, dtype, reference)
        acc.update(measure.float64_rule(result, eager, eager64, acc["max_abs_error"],
                                        entry.tolerance(side["precision"]), notes))
        # ``result`` is the first, checked run (every layer unfused); ``graphed`` the timed
        # path (fused multiply-adds, CUDA graph): both are judged
        acc["graphs_equal_uncaptured"] = all(
            torch.equal(a, b) for a, b in zip(measure.tensors(graphed), measure.tensors(result)))
        acc["graphed"] = measure.float64_rule(graphed, eager, eager64, measure.accuracy(
            reference, graphed)["max_abs_error"], entry.tolerance(side["precision"]), [])
        acc["graphed_inductor"] = measure.float64_rule(
            graphed_inductor, eager, eager64, measure.accuracy(reference, graphed_inductor)[
                "max_abs_error"], entry.tolerance(side["precision"]), [])
        acc["passed"] = (acc["passed"] and acc["graphed"]["passed"]
                         and acc["graphed_inductor"]["passed"])
        record["accuracy"] = acc
        stage = "latency"
        low = copy.deepcopy(model).to(dtype)
        low_args, low_kwargs = _to(args, device, dtype), _to(kwargs, device, dtype)
        settings = cuda_graphs.set_cuda_graphs(compiled, True, replay="plain")
        whole = cuda_graphs.whole_module(compiled)

        def ours(replay: str, module=compiled):
            def call():
                settings.replay = replay  # one attribute per call: the rounds alternate
                return module(*args, **kwargs)
            return call

        variants = {"eager": (lambda: low(*low_args, **low_kwargs), False),
                    "ours_no_graphs": (ours("plain"), False),
                    "ours_engine_graphs": (ours("plain"), True),
                    "ours_inductor_graphs": (ours("inductor"), True),
                    "ours_whole_graph": (ours("plain", whole), True)}
        stage = "anchors"
        compile_s, failed = {}, {}
        for anchor in anchors:
            start = time.perf_counter()
            # max-autotune times candidate kernels on the GPU: not while another program's
            # rounds run; the other compiles are mostly CPU work and overlap
            turn = gpu_lock if anchor == "max-autotune" else contextlib.nullcontext()
            try:  # an anchor that cannot run here (no compiler, no Triton) is recorded
                with turn:
                    fn = anchor_call(low, anchor, low_args, low_kwargs)
            except Exception as err:
                failed[anchor] = f"{type(err).__name__}: {_first_line(err)}"
                continue
            variants[ANCHOR_COLUMNS[anchor]] = (fn, False)
            compile_s[anchor] = time.perf_counter() - start
        record["anchors_failed"] = failed
        stage = "latency"
        with gpu_lock:
            times = _alternate(variants, warmup, runs, repeats, cuda_graphs.cuda_graphs)
        for anchor, seconds in compile_s.items():
            times[ANCHOR_COLUMNS[anchor]]["compile_and_first_call_s"] = seconds
        record["latency"] = times
        record["graphs"] = {name: [v is not None for v in runner.graphs.replays.values()]
                            for name, runner in _runners(compiled)}
        # per engine and signature: whether the inductor replay compiled (else it ran plain)
        record["replays_compiled"] = {
            name: [v is not None for v in runner.compiled.compiled.values()]
            if runner.compiled is not None else [] for name, runner in _runners(compiled)}
    except Exception as err:  # the run records the failure and goes on
        record["status"] = "error"
        record["error"] = {"stage": stage, "type": type(err).__name__,
                           "message": str(err)[:2000]}
    finally:
        caught.__exit__(None, None, None)
    record["warnings"] = sorted({str(w.message)[:400] for w in seen})
    log(summary_line(record))
    return record


# torch.compile of the zoo model: the anchors ``zoo latency`` times ours against (issue 42);
# reduce-overhead and max-autotune replay CUDA graphs (cudagraph trees), as ours does.
ANCHORS = ("inductor", "reduce-overhead", "max-autotune")
ANCHOR_COLUMNS = {"inductor": "inductor", "reduce-overhead": "reduce_overhead",
                  "max-autotune": "max_autotune"}


def anchor_call(model: torch.nn.Module, anchor: str, args, kwargs) -> Callable[[], Any]:
    """``model`` compiled in ``anchor``'s mode, called once (the compile), as a call of
    ``args, kwargs``; raises where torch.compile cannot run (e.g. no C++ compiler for CPU
    code)."""
    mode = None if anchor == "inductor" else anchor
    fast = torch.compile(model, mode=mode)
    with torch.no_grad():
        for _ in range(3):  # cudagraph trees record on the second or third call
            fast(*args, **kwargs)
    return lambda: fast(*args, **kwargs)


def _first_line(err: BaseException) -> str:
    while getattr(err, "inner_exception", None) or err.__cause__:  # dynamo's wrapper
        err = getattr(err, "inner_exception", None) or err.__cause__
    text = str(err).strip()
    return text.splitlines()[0][:300] if text else ""


def _alternate(variants: dict, warmup: int, runs: int, repeats: int,
               graphs: Callable) -> dict[str, Any]:
    """``cuda_latency`` of each variant (a call, and whether CUDA graphs are on for it:
    ``with graphs(on)``), ``repeats`` rounds with the variants alternating; each variant's
    record is its median round, with every round's median and p90 beside it (the spread)."""
    rounds: dict[str, list] = {name: [] for name in variants}
    for _ in range(repeats):
        for name, (fn, on) in variants.items():
            with graphs(on):
                rounds[name].append(cuda_latency(fn, warmup, runs))
    times = {}
    for name, seen in rounds.items():
        order = sorted(seen, key=lambda t: t["median_ms"])
        times[name] = {**order[len(order) // 2],
                       "round_medians_ms": [t["median_ms"] for t in seen],
                       "round_p90_ms": [t["p90_ms"] for t in seen]}
    return times


def _runners(compiled):
    """(engine name, its reference runner) of every engine that ran on the reference
    executor."""
    for name, module in compiled.named_modules():
        runner = getattr(getattr(module, "handle", None), "_reference", None)
        if runner is not None:
            yield name, runner


def environment(device: str) -> dict[str, Any]:
    env = {"torch": torch.__version__, "python": platform.python_version()}
    try:
        from torch_trt_ref._trt import BACKEND, trt
        env["tensorrt"] = f"{BACKEND} {trt.__version__}"
    except ImportError:
        env["tensorrt"] = "none"
    if device.startswith("cuda") and torch.cuda.is_available():
        env["gpu"] = torch.cuda.get_device_name(device)
        env["cuda"] = torch.version.cuda
        try:
            import subprocess
            env["driver"] = subprocess.run(
                ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                capture_output=True, text=True, timeout=20).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            env["driver"] = "unknown"
    return env


COLUMNS = ("eager", "inductor", "reduce_overhead", "max_autotune", "ours_no_graphs",
           "ours_engine_graphs", "ours_inductor_graphs", "ours_whole_graph")
RATIOS = ("eager", "inductor", "reduce_overhead", "max_autotune")


def summary_line(r: dict) -> str:
    if r["status"] != "ok":
        return f"{r['program']}: {r['status']} at {r['error']['stage']}: {r['error']['type']}"
    lat = r["latency"]
    cells = ", ".join(f"{k} {lat[k]['median_ms']:.3f}" for k in COLUMNS if k in lat)
    failed = "".join(f"; {k} could not run ({why})"
                     for k, why in r.get("anchors_failed", {}).items())
    return (f"{r['program']}: float64 rule {r['accuracy'].get('passed')}; ms median: {cells}"
            + failed)


def markdown(records: list[dict]) -> str:
    """The latency table: median / p90 ms per variant (with the range of the round medians),
    and the best of ours over eager and each torch.compile anchor; "best ours" is the
    fastest of ours' columns, each named in the last column."""
    envs = sorted({f"{r['env'].get('gpu')}, driver {r['env'].get('driver')}, torch "
                   f"{r['env'].get('torch')}, TensorRT {r['env'].get('tensorrt')}"
                   for r in records})
    lines = [f"- {e}" for e in envs] + ["", "| program | executors | float64 rule | "
             + " | ".join(f"{c} ms median / p90" for c in COLUMNS) + " | "
             + " | ".join(f"best ours / {c}" for c in RATIOS) + " | best ours |",
             "|" + "---|" * (len(COLUMNS) + len(RATIOS) + 4)]
    for r in records:
        if r["status"] != "ok":
            lines.append(f"| {r['program']} | {r['status']} at {r['error']['stage']}: "
                         f"{r['error']['type']} |" + " |" * (len(COLUMNS) + len(RATIOS) + 2))
            continue
        lat = r["latency"]
        ours = [k for k in COLUMNS if k.startswith("ours") and k in lat]
        best = min(ours, key=lambda k: lat[k]["median_ms"])
        ratio = lambda k: f"{lat[best]['median_ms'] / lat[k]['median_ms']:.2f}x" if k in lat \
            else "-"  # noqa: E731
        acc = r["accuracy"]
        # ratios of the first (checked) run, the graphed plain and graphed inductor replays
        ratios = [acc.get("ratio"), acc.get("graphed", {}).get("ratio")] + (
            [acc["graphed_inductor"].get("ratio")] if "graphed_inductor" in acc else [])
        rule = f"{'ok' if acc.get('passed') else 'FAIL'} (" + " / ".join(
            "-" if r is None else f"{r:.2f}" for r in ratios) + ")"
        failed = r.get("anchors_failed", {})
        cells = [_cell(lat[k]) if k in lat else "-" for k in COLUMNS]
        cells = [f"could not run ({failed[a]})" if failed.get(a) and c == "-" else c
                 for a, c in zip(("eager", *ANCHORS, "", "", "", ""), cells)]
        lines.append(f"| {r['program']} | {'+'.join(r.get('executors', []))} | {rule} | "
                     + " | ".join(cells) + " | " + " | ".join(ratio(k) for k in RATIOS)
                     + f" | {best} |")
    return "\n".join(lines) + "\n"


def _cell(t: dict) -> str:
    """median / p90 ms, and the range of the round medians where there were rounds."""
    rounds = t.get("round_medians_ms", [])
    spread = f" ({min(rounds):.3f}-{max(rounds):.3f})" if len(rounds) > 1 else ""
    return f"{t['median_ms']:.3f} / {t['p90_ms']:.3f}{spread}"


LATENCY_KINDS = ("gpu_latency", "llm_latency")


def split_records(records: list[dict]) -> tuple[list[dict], list[dict]]:
    """(sweep records, ``zoo latency`` records) of what ``zoo report`` read."""
    return ([r for r in records if r.get("kind") not in LATENCY_KINDS],
            [r for r in records if r.get("kind") in LATENCY_KINDS])


def gpu_section(records: list[dict]) -> str:
    programs = [r for r in records if r.get("kind") == "gpu_latency"]
    decoders = [r for r in records if r.get("kind") == "llm_latency"]
    return "## Latency of saved programs on a GPU (zoo latency)\n\n" + (
        markdown(programs) if programs else "") + (
        "\nDecoders (tokens/s, time to first token):\n\n" + llm_latency.markdown(decoders)
        if decoders else "")


def save_command(args: argparse.Namespace) -> int:
    models = args.models or ([] if args.decoders else list(QUICK))
    if models:
        save_programs(models, args.precisions, args.batches, Path(args.out), args.strategy,
                      not args.no_plans, weights=not args.no_weights)
    if args.decoders:
        llm_latency.save_decoders(args.decoders, args.precisions, Path(args.out),
                                  *args.decoder_shape, args.prompt_len, args.new_tokens)
    return 0


def latency_command(args: argparse.Namespace) -> int:
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print(f"--device {args.device}: torch {torch.__version__} sees no CUDA device",
              file=sys.stderr)
        return 2
    paths = sorted(p for d in args.programs for p in
                   (Path(d).glob(f"*{PROGRAM}") if Path(d).is_dir() else [Path(d)]))
    if not paths:
        print(f"no {PROGRAM} programs in {args.programs}", file=sys.stderr)
        return 2
    records, decoders = [], []
    for i, path in enumerate(paths):
        print(f"[{i + 1}/{len(paths)}] {path.name}", flush=True)
        if json.loads(path.with_suffix(SIDE).read_text()).get("kind") == "llm":
            decoders.append({**llm_latency.measure_decoder(path, args.device, args.repeats),
                             "env": environment(args.device)})
            continue
        anchors = [] if args.no_inductor else args.anchors
        lock = _FileLock(args.gpu_lock) if args.gpu_lock else contextlib.nullcontext()
        records.append(measure_program(path, args.device, args.warmup, args.runs, anchors,
                                       repeats=args.repeats, gpu_lock=lock))
        gc.collect()
        torch.cuda.empty_cache()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("a") as f:
        for r in records + decoders:
            f.write(json.dumps(r, default=str) + "\n")
    table = (markdown(records) if records else "") + (
        llm_latency.markdown(decoders) if decoders else "")
    out.with_suffix(".md").write_text(table)
    print(table)
    return 0 if all(r["status"] == "ok" and r["accuracy"].get("passed") for r in records) \
        and all(llm_latency.passed(r) for r in decoders) else 1


class _FileLock:
    """An exclusive ``flock`` on a file, held for a ``with`` block."""

    def __init__(self, path: str):
        self.path = path

    def __enter__(self):
        import fcntl

        self.file = open(self.path, "a")
        fcntl.flock(self.file, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        import fcntl

        fcntl.flock(self.file, fcntl.LOCK_UN)
        self.file.close()


def add_parsers(sub) -> None:
    """``zoo save`` and ``zoo latency`` under the zoo command's subparsers."""
    s = sub.add_parser("save", help="compile zoo models and save each program (for latency "
                                    "on another machine)")
    s.add_argument("out", help="folder for the .prog files and their .json sidecars")
    s.add_argument("--models", nargs="+", help=f"zoo models (default: quick {list(QUICK)})")
    s.add_argument("--precisions", nargs="+", default=["fp16"], choices=list(PRECISION_DTYPES),
                   help="compile precisions (default fp16)")
    s.add_argument("--batches", nargs="+", type=number(int), default=[1],
                   help="batch sizes: dim 0 of the zoo inputs (default 1)")
    s.add_argument("--strategy", default="fast", choices=PARTITIONERS,
                   help="partition strategy (default fast)")
    s.add_argument("--no-plans", action="store_true",
                   help="leave the TensorRT plans out (the reference executor runs them)")
    s.add_argument("--no-weights", action="store_true",
                   help="leave the engine weights out; `zoo latency` refits them from the "
                        "zoo model rebuilt from its seed (programs of a few hundred KiB)")
    s.add_argument("--decoders", nargs="+", default=[], choices=sorted(MODELS),
                   help="decoders of torch_trt_ref.llm.models to save too (alone if no "
                        "--models): each compiled over a static KV cache as a two-profile "
                        "program and a decode-only one, without plans or engine weights; "
                        "`zoo latency` times tokens/s (docs/llm.md)")
    s.add_argument("--decoder-shape", nargs=3, type=number(int), default=[2, 64, 1000],
                   metavar=("LAYERS", "HIDDEN", "VOCAB"),
                   help="the decoders' layers, hidden size and vocabulary (default 2 64 1000)")
    s.add_argument("--prompt-len", type=number(int), default=32,
                   help="decoders: prompt tokens (default 32)")
    s.add_argument("--new-tokens", type=number(int), default=128,
                   help="decoders: new tokens (default 128)")
    s.set_defaults(func=save_command)
    lat = sub.add_parser("latency", help="load saved zoo programs and time them beside eager "
                                         "and inductor with CUDA events")
    lat.add_argument("programs", nargs="+", help=".prog files or folders of them")
    lat.add_argument("--device", default="cuda", help="where to run (default cuda)")
    lat.add_argument("--warmup", type=number(int, low_included=True), default=20,
                     help="untimed calls (default 20)")
    lat.add_argument("--runs", type=number(int), default=100, help="timed calls (default 100)")
    lat.add_argument("--repeats", type=number(int), default=1,
                     help="rounds of every variant, alternating (default 1); the table gives "
                          "the median round and the spread of the round medians")
    lat.add_argument("--anchors", nargs="+", default=list(ANCHORS), choices=ANCHORS,
                     help="torch.compile modes timed beside ours (default all; max-autotune "
                          "compiles for minutes per model)")
    lat.add_argument("--no-inductor", action="store_true",
                     help="skip every torch.compile anchor (their compiles take seconds to "
                          "minutes per model)")
    lat.add_argument("--gpu-lock", help="a lock file: processes timing programs side by side "
                                        "take turns for the timed rounds (compiles overlap)")
    lat.add_argument("--out", default="out/gpu_latency.jsonl",
                     help="JSON-lines records, appended (a .md table beside it)")
    lat.set_defaults(func=latency_command)
