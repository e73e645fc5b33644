"""Decoder tokens/s on a GPU (issue 39): compiled decoders (``torch_trt_ref.llm``) saved here
and timed on the lent GPU machine against transformers' own ``generate`` with its static
cache, eager and with ``torch.compile(mode="reduce-overhead")`` (transformers' automatic
compile of the static-cache decode step), in one process, in alternating rounds.

``save DIR``: compile each decoder of ``SPECS`` (random weights drawn from a seed by
``seeded``, so the GPU machine rebuilds the same model with its own transformers) on the
reference executor and save it without plans and without engine weights (zoo/weightless.py:
refit there from the rebuilt model), with a sidecar JSON.
``measure DIR OUT.json``: per decoder: load, refit, move to CUDA; then per round and variant
the time to first token (``generate`` of 1 new token, the prefill; median of 3 calls) and
the decode rate ((NEW - 1) / (time of NEW new tokens - time to first token)); the variants
are ours (reference executor on CUDA: prefill on the two-profile engine, decode steps of a
decode-only compile replayed from one CUDA graph bound to the cache, llm/graphs.py Note
[Decode graph]; the two-profile engine's own decode steps replayed from one CUDA graph,
their shapes resolved before capture (``ours_graph_one_engine``: runtime/reference/resolved.py
Note [Shapes resolved before capture]: one engine, weights held once); and the two-profile
engine alone, without graphs), transformers eager
(``disable_compile``) and transformers reduce-overhead. Tokens of every variant are
compared with transformers eager's (env VARIANTS: which variants run). Records are
written after each decoder (a timeout keeps what finished).
``table RECORDS.json...``: the markdown table of docs/llm.md.
Usage: python perf/studies/gpu/llm_tokens.py save DIR | measure DIR OUT.json [ROUNDS] |
table RECORDS.json..."""

from __future__ import annotations

import copy
import json
import os
import platform
import statistics
import sys
import time
import warnings
from pathlib import Path

import torch

import torch_trt_ref
import torch_trt_ref.llm as llm
from torch_trt_ref.llm.models import build
from torch_trt_ref.llm.step import step_for
from zoo import weightless

PROMPT, NEW, SEED = 32, 128, 0
# name: (model, layers, hidden, vocab, precision); gpt2_12l is GPT-2 small's shape
SPECS = {
    "llama_2l-fp16": ("llama", 2, 64, 1000, "fp16"),
    "gpt2_2l-fp16": ("gpt2", 2, 64, 1000, "fp16"),
    "gpt2_12l-fp16": ("gpt2", 12, 768, 50257, "fp16"),
    "llama_2l-fp32": ("llama", 2, 64, 1000, "fp32"),
    "gpt2_2l-fp32": ("gpt2", 2, 64, 1000, "fp32"),
    "gpt2_12l-fp32": ("gpt2", 12, 768, 50257, "fp32"),
}
DTYPES = {"fp16": torch.float16, "fp32": torch.float32}
VARIANTS = os.environ.get("VARIANTS", "ours_graph ours_graph_one_engine ours_no_graph "
                          "hf_eager hf_reduce_overhead").split()


def seeded(name: str, layers: int, hidden: int, vocab: int) -> torch.nn.Module:
    """The decoder with every matrix drawn from N(0, 0.02) by one seeded generator in
    parameter order (norms and biases keep their constant init): the same weights on any
    machine whose transformers names the parameters alike."""
    model = build(name, layers, hidden, vocab, seed=SEED)
    gen = torch.Generator().manual_seed(SEED)
    with torch.no_grad():
        for _, p in model.named_parameters():
            if p.dim() >= 2:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.02)
    return model


@torch.no_grad()
def checksum(model: torch.nn.Module) -> float:
    return float(sum(p.double().sum() for p in model.parameters()))


def _step_model(model: torch.nn.Module, precision: str, buffers: int) -> torch.nn.Module:
    return step_for(copy.deepcopy(model).to(DTYPES[precision]), buffers)


def save(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for key, (name, layers, hidden, vocab, precision) in SPECS.items():
        model = seeded(name, layers, hidden, vocab)
        start = time.perf_counter()
        compiled = llm.compile(model, max_seq_len=PROMPT + NEW, max_prompt_len=PROMPT,
                               precision=precision, executor="reference")
        seconds = time.perf_counter() - start
        step = _step_model(model, precision, len(compiled.shapes))
        weightless.strip(compiled.module, step)
        path = torch_trt_ref.save(compiled, folder / f"{key}.ttrt", plans=False)
        # decode-only (static shapes): the steps a CUDA graph replays (Note [Decode graph])
        decode_only = llm.compile(model, max_seq_len=PROMPT + NEW, max_prompt_len=1,
                                  precision=precision, executor="reference")
        weightless.strip(decode_only.module, step)
        torch_trt_ref.save(decode_only, folder / f"{key}.decode.ttrt", plans=False)
        side = {"program": key, "model": name, "layers": layers, "hidden": hidden,
                "vocab": vocab, "precision": precision, "prompt": PROMPT, "new": NEW,
                "weights_checksum": checksum(model), "compile_s": seconds,
                "kv_cache": compiled.compile_report.kv_cache.to_json(),
                "torch": torch.__version__}
        path.with_suffix(".json").write_text(json.dumps(side, indent=1))
        print(f"saved {path.name}: {path.stat().st_size / 2**20:.1f} MiB, {seconds:.0f} s")


def _timed(fn) -> tuple[float, torch.Tensor]:
    torch.cuda.synchronize()
    start = time.perf_counter()
    out = fn()
    torch.cuda.synchronize()
    return time.perf_counter() - start, out


def _variants(side: dict, path: Path) -> tuple[dict, torch.Tensor]:
    model = seeded(side["model"], side["layers"], side["hidden"], side["vocab"])
    if checksum(model) != side["weights_checksum"]:
        raise RuntimeError(f"{path.name}: the rebuilt weights differ from the saved ones")
    compiled, decode_only = (torch_trt_ref.load(p) for p in (path, path.with_suffix(
        ".decode.ttrt")))
    step = _step_model(model, side["precision"], len(compiled.shapes))
    for decoder in (compiled, decode_only):
        weightless.restore(decoder.module, step)  # refits the engines in place
    compiled, decode_only = compiled.to("cuda"), decode_only.to("cuda")
    eager = copy.deepcopy(model).to("cuda", DTYPES[side["precision"]]).eval()
    prompt = torch.randint(0, side["vocab"], (1, PROMPT), device="cuda",
                           generator=torch.Generator("cuda").manual_seed(1))
    graph = llm.DecodeGraph(decode_only, decode_only.new_cache("cuda"))
    one_engine = llm.DecodeGraph(compiled, compiled.new_cache("cuda"))

    def hf(n: int, compile_: bool):
        return eager.generate(prompt, max_new_tokens=n, min_new_tokens=n, do_sample=False,
                              cache_implementation="static", eos_token_id=None,
                              pad_token_id=0, disable_compile=not compile_)

    variants = {
        "ours_graph": lambda n: llm.generate(compiled, prompt, n, eos_token_id=None,
                                             cuda_graph=graph),
        "ours_graph_one_engine": lambda n: llm.generate(compiled, prompt, n, eos_token_id=None,
                                                        cuda_graph=one_engine),
        "ours_no_graph": lambda n: llm.generate(compiled, prompt, n, eos_token_id=None),
        "hf_eager": lambda n: hf(n, False),
        "hf_reduce_overhead": lambda n: hf(n, True),
    }
    return {k: v for k, v in variants.items() if k in VARIANTS}, prompt


def measure_one(path: Path, rounds: int) -> dict:
    side = json.loads(path.with_suffix(".json").read_text())
    record = {**side, "status": "ok", "rounds": rounds}
    try:
        with torch.no_grad():
            variants, _ = _variants(side, path)
            tokens, warm_s, failed = {}, {}, {}
            for name, fn in list(variants.items()):  # warm-up: captures, compiles
                start = time.perf_counter()
                try:
                    for n in (NEW, 1, NEW):
                        tokens[name] = fn(n)
                except Exception as err:  # recorded; the other variants go on
                    failed[name] = f"{type(err).__name__}: {str(err)[:1500]}"
                    del variants[name]
                    torch.cuda.synchronize()
                    continue
                warm_s[name] = time.perf_counter() - start
            record["failed"] = failed
            want = tokens["hf_eager"][0, PROMPT:]
            record["tokens_equal_hf_eager"] = {
                k: int((v[0, PROMPT:] == want).sum()) for k, v in tokens.items()}
            record["warmup_s"] = warm_s
            times: dict[str, dict[str, list]] = {k: {"ttft_ms": [], "tokens_per_s": []}
                                                 for k in variants}
            order = list(variants)
            for r in range(rounds):
                for name in order[r % len(order):] + order[:r % len(order)]:
                    fn = variants[name]
                    ttft = statistics.median(_timed(lambda: fn(1))[0] for _ in range(3))
                    full, out = _timed(lambda: fn(NEW))
                    assert out.shape[1] == PROMPT + NEW
                    times[name]["ttft_ms"].append(ttft * 1e3)
                    times[name]["tokens_per_s"].append((NEW - 1) / (full - ttft))
        record["times"] = {k: {m: {"median": statistics.median(v), "min": min(v),
                                   "max": max(v), "rounds": v} for m, v in t.items()}
                           for k, t in times.items()}
    except Exception as err:  # the run records the failure and goes on
        record.update(status="error", error=f"{type(err).__name__}: {str(err)[:1500]}")
    return record


def measure(folder: Path, out: Path, rounds: int) -> None:
    import transformers

    env = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
           "cuda": torch.version.cuda, "transformers": transformers.__version__,
           "python": platform.python_version(), "prompt": PROMPT, "new": NEW}
    records = []
    for key in SPECS:
        path = folder / f"{key}.ttrt"
        if not path.exists():
            continue
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            record = measure_one(path, rounds)
        record["seconds"] = time.perf_counter() - start
        records.append(record)
        out.write_text(json.dumps({"kind": "llm_tokens", "env": env, "records": records},
                                  indent=1))
        line = {k: (f"{v['tokens_per_s']['median']:.0f} tok/s, "
                    f"ttft {v['ttft_ms']['median']:.2f} ms")
                for k, v in record.get("times", {}).items()}
        print(key, record["status"], record.get("error", ""), line,
              record.get("tokens_equal_hf_eager"), f"{record['seconds']:.0f} s", flush=True)


def _cell(t: dict | None, key: str, fmt: str) -> str:
    if t is None:
        return "-"
    v = t[key]
    return f"{v['median']:{fmt}} ({v['min']:{fmt}}-{v['max']:{fmt}})"


def table(files: list[Path]) -> str:
    """Markdown of the records in ``files`` (a later file's variant wins): per decoder,
    tokens/s and time to first token of each variant (median (min-max) over the rounds),
    and the new tokens equal to transformers eager's."""
    rows: dict[str, dict] = {}
    for f in files:
        for r in json.loads(f.read_text())["records"]:
            row = rows.setdefault(r["program"], {"times": {}, "equal": {}})
            row["times"].update(r.get("times", {}))
            row["equal"].update(r.get("tokens_equal_hf_eager", {}))
    names = ["ours_graph", "ours_graph_one_engine", "ours_no_graph", "hf_eager",
             "hf_reduce_overhead"]
    out = ["| decoder | " + " | ".join(f"{n} tok/s" for n in names) + " | "
           + " | ".join(f"{n} TTFT ms" for n in names) + " | tokens equal to hf_eager |",
           "|---" * (2 * len(names) + 2) + "|"]
    for program, row in rows.items():
        t = row["times"]
        out.append(f"| {program} | " + " | ".join(
            _cell(t.get(n), "tokens_per_s", ".0f") for n in names) + " | " + " | ".join(
            _cell(t.get(n), "ttft_ms", ".1f") for n in names) + " | " + ", ".join(
            f"{n} {row['equal'][n]}/{NEW}" for n in names if n in row["equal"]
            and n != "hf_eager") + " |")
    return "\n".join(out)


if __name__ == "__main__":
    if sys.argv[1:2] == ["save"]:
        save(Path(sys.argv[2]))
    elif sys.argv[1:2] == ["measure"]:
        measure(Path(sys.argv[2]), Path(sys.argv[3]),
                int(sys.argv[4]) if len(sys.argv) > 4 else 3)
    elif sys.argv[1:2] == ["table"]:
        print(table([Path(f) for f in sys.argv[2:]]))
    else:
        sys.exit(f"usage: {sys.argv[0]} save DIR | measure DIR OUT.json [ROUNDS] | "
                 "table RECORDS.json...")
