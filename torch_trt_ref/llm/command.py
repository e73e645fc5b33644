"""``torch-trt-ref llm run MODEL``: compile a small decoder (llm/models.py) with a static KV
cache, generate with a progress bar, and print time to first token (the prefill step),
decode tokens/s with its spread, and peak memory."""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time

import torch

from ..quantization import quantize
from .compiled import DTYPES, compile
from .generate import generate
from .models import MODELS, build


def add_llm_command(sub) -> None:
    p = sub.add_parser("llm", help="decoder LLMs over a static KV cache (docs/llm.md)")
    llm_sub = p.add_subparsers(dest="llm_command", required=True, metavar="SUBCOMMAND")
    r = llm_sub.add_parser("run", help="compile a small decoder and generate: TTFT, "
                                       "tokens/s, peak memory")
    r.add_argument("model", choices=sorted(MODELS), help="decoder configuration")
    r.add_argument("--prompt-len", type=int, default=32,
                   help="tokens of the random prompt (the prefill step; default 32)")
    r.add_argument("--new-tokens", type=int, default=128,
                   help="tokens to generate greedily (default 128)")
    r.add_argument("--precision", choices=sorted(DTYPES), default="fp32",
                   help="compile precision and cache dtype (default fp32)")
    r.add_argument("--quantize", choices=("int8", "fp8", "nvfp4"), default=None,
                   help="post-training quantization (torch_trt_ref.quantize) before compile")
    r.add_argument("--layers", type=int, default=2, help="decoder layers (default 2)")
    r.add_argument("--hidden", type=int, default=64, help="hidden size (default 64)")
    r.add_argument("--executor", choices=("auto", "reference", "tensorrt"), default="auto",
                   help="what runs the engine (default auto)")
    r.add_argument("--seed", type=int, default=0,
                   help="seed of the weights, prompt and calibration data")
    r.set_defaults(func=run_command)


def run_command(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    if args.prompt_len < 1 or args.new_tokens < 1:
        raise ValueError("--prompt-len and --new-tokens must be >= 1")
    model = build(args.model, args.layers, args.hidden, seed=args.seed)
    vocab = model.config.get_text_config(decoder=True).vocab_size
    gen = torch.Generator().manual_seed(args.seed)
    prompt = torch.randint(0, vocab, (1, args.prompt_len), generator=gen)
    if args.quantize:
        calibration = [(torch.randint(0, vocab, (1, args.prompt_len), generator=gen),)
                       for _ in range(4)]
        model = quantize(model, calibration, precision=args.quantize)
    start = time.perf_counter()
    compiled = compile(model, max_seq_len=args.prompt_len + args.new_tokens,
                       max_prompt_len=args.prompt_len, precision=args.precision,
                       executor=args.executor)
    print(f"compiled in {time.perf_counter() - start:.1f}s: "
          f"{compiled.compile_report.counts}, cache {compiled.compile_report.kv_cache.to_json()}",
          file=sys.stderr)
    stamps = [time.perf_counter()]
    with tqdm(total=args.new_tokens, desc="tokens", file=sys.stderr) as bar:
        def tick(_):
            stamps.append(time.perf_counter())
            bar.update(1)
        ids = generate(compiled, prompt, max_new_tokens=args.new_tokens, eos_token_id=None,
                       on_token=tick)
    steps = [b - a for a, b in zip(stamps[1:], stamps[2:])]
    print(f"time to first token: {(stamps[1] - stamps[0]) * 1e3:.1f} ms "
          f"(prefill of {args.prompt_len} tokens)")
    if steps:
        rates = sorted(1 / s for s in steps)
        q = statistics.quantiles(rates, n=4) if len(rates) > 1 else [rates[0]] * 3
        print(f"decode: {len(steps) / sum(steps):.1f} tokens/s (per step: median "
              f"{q[1]:.1f}, quartiles {q[0]:.1f}..{q[2]:.1f}; {len(steps)} steps)")
    peak = (f"{torch.cuda.max_memory_allocated() / 2**20:.0f} MiB CUDA, "
            if torch.cuda.is_available() else "")
    print(f"peak memory: {peak}{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} "
          f"MiB RSS; executor {compiled.executor}; {ids.shape[1]} ids")
    return 0
