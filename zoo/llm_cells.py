"""``zoo llm``: decoder-LLM cells (issue 39, docs/llm.md): a small decoder
(``torch_trt_ref.llm.models``) compiled over a static KV cache, then timed generating:
prefill latency (time to first token), per-token decode latency, tokens/s, engines,
optimization profiles, cache bytes and in-place cache outputs, beside transformers' own
``generate`` with its static cache in the same process (alternating rounds), and whether
the tokens are equal. One JSON line per cell (``kind: "llm"``). In a sweep (``zoo run``) a
cell named ``llm:NAME`` (``zoo.matrix.QUICK_LLM``) is one of these, recorded as any cell
is (``run_llm_cell``: status, env, its numbers under ``llm``)."""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
import traceback
from pathlib import Path

import torch

import torch_trt_ref.llm as llm
from torch_trt_ref.llm.compiled import DTYPES
from torch_trt_ref.llm.models import MODELS, build

from .matrix import LLM_PREFIX
from .schema import SCHEMA_VERSION, environment

# A sweep's llm cells: the gate's decoder shape (16-token prompt, 8 new tokens; the
# cache holds 24 positions), so the quick sweep stays short (docs/zoo.md, "Decoder-LLM cells").
SWEEP_SHAPE = {"prompt_len": 16, "new_tokens": 8}


def _quantiles(values: list[float]) -> dict:
    if len(values) < 2:
        return {"median": values[0] if values else None, "p10": None, "p90": None}
    deciles = statistics.quantiles(values, n=10)
    return {"median": statistics.median(values), "p10": deciles[0], "p90": deciles[-1]}


def _ours(compiled, prompt: torch.Tensor, new_tokens: int) -> tuple[torch.Tensor, list]:
    stamps = [time.perf_counter()]
    ids = llm.generate(compiled, prompt, max_new_tokens=new_tokens, eos_token_id=None,
                       on_token=lambda _: stamps.append(time.perf_counter()))
    return ids, [b - a for a, b in zip(stamps, stamps[1:])]


def _theirs(model, prompt: torch.Tensor, new_tokens: int) -> tuple[torch.Tensor, float]:
    start = time.perf_counter()
    with torch.no_grad():
        ids = model.generate(prompt, max_new_tokens=new_tokens, do_sample=False,
                             eos_token_id=None, cache_implementation="static", pad_token_id=0)
    return ids, time.perf_counter() - start


def llm_cell(name: str, prompt_len: int = 32, new_tokens: int = 128,
             precision: str = "fp32", executor: str = "reference", rounds: int = 1,
             layers: int = 2, hidden: int = 64, warmup: int = 0) -> dict:
    """One cell: compile, then ``rounds`` alternating rounds of ours and transformers'
    (after ``warmup`` untimed one-token generations of each)."""
    model = build(name, layers, hidden)
    vocab = model.config.get_text_config(decoder=True).vocab_size
    prompt = torch.randint(0, vocab, (1, prompt_len), generator=torch.Generator().manual_seed(0))
    start = time.perf_counter()
    compiled = llm.compile(model, max_seq_len=prompt_len + new_tokens,
                           max_prompt_len=prompt_len, precision=precision, executor=executor)
    compile_s = time.perf_counter() - start
    eager = model.to(compiled.dtype)
    for _ in range(warmup):
        _ours(compiled, prompt, 1)
        _theirs(eager, prompt, 1)
    prefill, decode, rates, eager_rates, equal = [], [], [], [], None
    for _ in range(rounds):
        ids, steps = _ours(compiled, prompt, new_tokens)
        prefill.append(steps[0])
        decode += steps[1:]
        if steps[1:]:
            rates.append(len(steps[1:]) / sum(steps[1:]))
        theirs, seconds = _theirs(eager, prompt, new_tokens)
        eager_rates.append(new_tokens / seconds)
        equal = int((ids[:, prompt_len:] == theirs[:, prompt_len:]).sum())
    kv = compiled.compile_report.kv_cache
    return {"kind": "llm", "model": name, "layers": layers, "hidden": hidden,
            "precision": precision, "executor": compiled.executor,
            "prompt_len": prompt_len, "new_tokens": new_tokens, "rounds": rounds,
            "compile_s": compile_s, "engines": compiled.compile_report.counts.get("tensorrt", 0),
            "profiles": kv.profiles, "cache_bytes": kv.bytes, "in_place": kv.in_place,
            "prefill_ms": _quantiles([s * 1e3 for s in prefill]),
            "decode_ms": _quantiles([s * 1e3 for s in decode]),
            "tokens_per_s": _quantiles(rates),
            "eager_static_cache_tokens_per_s": _quantiles(eager_rates),
            "tokens_equal_to_transformers": equal}


def run_llm_cell(cell, warmup: int = 1, runs: int = 1, max_seconds: float = 0.0) -> dict:
    """The sweep record of an ``llm:NAME`` cell (zoo/cell.py's envelope: status, error,
    env) with ``llm_cell``'s numbers under ``llm``: one round of generation at
    ``SWEEP_SHAPE`` (``runs`` and ``max_seconds`` do not apply: a round's decode steps give
    the spread; ``warmup`` > 0 generates one token first, untimed)."""
    record = {"schema_version": SCHEMA_VERSION, "kind": "llm", "cell": cell.to_json(),
              "status": "ok", "error": None, "env": {**environment(), "runner": "local",
                                                     "node": platform.node(),
                                                     "pid": os.getpid()}}
    try:
        name = cell.model.removeprefix(LLM_PREFIX)
        record["llm"] = llm_cell(name, precision=cell.precision, warmup=warmup, **SWEEP_SHAPE)
    except Exception as err:  # the sweep records the failure and goes on
        tb = "".join(traceback.format_exception(type(err), err, err.__traceback__))
        record.update(status="error", error={"stage": "llm", "type": type(err).__name__,
                                             "message": str(err)[:2000],
                                             "traceback": tb[-4000:]})
    return record


def summary(record: dict) -> str:
    """One line of a cell's numbers."""
    def n(value, digits=1):
        return "-" if value is None else f"{value:.{digits}f}"

    d = record["decode_ms"]
    return (f"{record['model']} {record['precision']}: prefill "
            f"{n(record['prefill_ms']['median'])} ms, decode {n(d['median'], 2)} ms/token "
            f"(p10..p90 {n(d['p10'], 2)}..{n(d['p90'], 2)}), "
            f"{n(record['tokens_per_s']['median'])} tokens/s vs transformers' static cache "
            f"{n(record['eager_static_cache_tokens_per_s']['median'])}; {record['engines']} "
            f"engine(s), {record['cache_bytes']} cache bytes; "
            f"{record['tokens_equal_to_transformers']}/{record['new_tokens']} tokens equal")


def llm_command(args: argparse.Namespace) -> int:
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    for name in args.models:
        for precision in args.precisions:
            record = llm_cell(name, args.prompt_len, args.new_tokens, precision,
                              args.executor, args.rounds, args.layers, args.hidden)
            with out.open("a") as f:
                f.write(json.dumps(record) + "\n")
            print(summary(record))
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("llm", help="decoder-LLM cells: prefill/decode latency, tokens/s, "
                                   "engines, cache bytes (docs/llm.md)")
    p.add_argument("--models", nargs="+", default=["llama"], choices=sorted(MODELS),
                   help="decoders (torch_trt_ref.llm.models; default llama)")
    p.add_argument("--precisions", nargs="+", default=["fp32"], choices=sorted(DTYPES),
                   help="compile precisions (default fp32)")
    p.add_argument("--prompt-len", type=int, default=32, help="prompt tokens (default 32)")
    p.add_argument("--new-tokens", type=int, default=128, help="new tokens (default 128)")
    p.add_argument("--rounds", type=int, default=1,
                   help="alternating rounds of ours and transformers' generate (default 1)")
    p.add_argument("--layers", type=int, default=2, help="decoder layers (default 2)")
    p.add_argument("--hidden", type=int, default=64, help="hidden size (default 64)")
    p.add_argument("--executor", default="reference", choices=("reference", "tensorrt", "auto"),
                   help="what runs the engine (default reference)")
    p.add_argument("--out", default="out/llm.jsonl", help="JSON-lines records, appended")
    p.set_defaults(func=llm_command)
