"""Decoders saved on one machine and timed on another (issue 39, item 4; docs/llm.md):
``zoo save --decoders NAME ...`` compiles each decoder of torch_trt_ref.llm.models (every
matrix drawn by one seeded generator: ``seeded``, so the other machine rebuilds the same
weights with its own transformers) over a static KV cache twice, the two-profile engine
(prefill and decode) and a decode-only compile (static shapes: the step one CUDA graph
replays, llm/graphs.py Note [Decode graph]), and saves both without plans or engine weights
beside a sidecar whose ``kind`` is ``"llm"``. ``zoo latency`` hands such a program to
``measure_decoder``: load both, rebuild the model there and refit the engines
(zoo/weightless.py), judge every step's logits of a greedy run against eager float64 given
the same prefix (the float64 rule), then per round and variant (alternating) the time to
first token (``generate`` of 1 new token, median of 3) and the decode rate ((new - 1) /
(fastest of 3 generates of all new tokens - fastest of 3 of the first token)). Variants:
ours with a CUDA graph per decode step and transformers' static-cache ``generate`` with its
reduce-overhead compile of the decode step, and the same graph over the two-profile
engine's own decode step (``ours_graph_one_engine``: its shapes resolved before capture,
runtime/reference/resolved.py; one engine, weights held once), these three on CUDA only;
ours without graphs, and transformers eager.
One JSON line per decoder (``kind: "llm_latency"``)."""

from __future__ import annotations

import copy
import json
import statistics
import time
from pathlib import Path

import torch

import torch_trt_ref
import torch_trt_ref.llm as llm
from torch_trt_ref.accuracy import judge
from torch_trt_ref.llm.compiled import DTYPES
from torch_trt_ref.llm.models import build
from torch_trt_ref.llm.step import step_for

from . import weightless

SEED = 0
PROGRAM, DECODE = ".prog", ".decode.ttrt"
CUDA_ONLY = ("ours_graph", "ours_graph_one_engine", "hf_reduce_overhead")
VARIANTS = ("ours_graph", "ours_graph_one_engine", "ours_no_graph", "hf_eager",
            "hf_reduce_overhead")


def key(model: str, layers: int, precision: str) -> str:
    return f"{model}_{layers}l-{precision}"


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


def save_decoders(names: list[str], precisions: list[str], out: Path, layers: int = 2,
                  hidden: int = 64, vocab: int = 1000, prompt: int = 32,
                  new: int = 128) -> list[Path]:
    """Compile and save each decoder in each precision (two programs and a sidecar each)."""
    wrong = sorted(set(precisions) - set(DTYPES))
    if wrong:
        raise ValueError(f"decoders compile in {sorted(DTYPES)}, not {wrong}")
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name in names:
        for precision in precisions:
            model = seeded(name, layers, hidden, vocab)
            start = time.perf_counter()
            compiled = llm.compile(model, max_seq_len=prompt + new, max_prompt_len=prompt,
                                   precision=precision, executor="reference")
            seconds = time.perf_counter() - start
            decode_only = llm.compile(model, max_seq_len=prompt + new, max_prompt_len=1,
                                      precision=precision, executor="reference")
            step = _step_model(model, precision, len(compiled.shapes))
            path = out / (key(name, layers, precision) + PROGRAM)
            for decoder, where in ((compiled, path), (decode_only, path.with_suffix(DECODE))):
                weightless.strip(decoder.module, step)
                torch_trt_ref.save(decoder, where, plans=False)
            side = {"kind": "llm", "program": path.stem, "model": name, "layers": layers,
                    "hidden": hidden, "vocab": vocab, "precision": precision,
                    "prompt": prompt, "new": new, "weights_checksum": checksum(model),
                    "compile_s": seconds, "saved_with_torch": torch.__version__,
                    "kv_cache": compiled.compile_report.kv_cache.to_json()}
            path.with_suffix(".json").write_text(json.dumps(side, indent=1))
            print(f"saved {path.name} (and its decode-only step): {seconds:.1f} s to compile",
                  flush=True)
            paths.append(path)
    return paths


def _timed(fn, device: str) -> tuple[float, torch.Tensor]:
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    sync()
    start = time.perf_counter()
    out = fn()
    sync()
    return time.perf_counter() - start, out


def _load(path: Path, side: dict, device: str):
    """(eager model, two-profile decoder, decode-only decoder), refit and on ``device``."""
    model = seeded(side["model"], side["layers"], side["hidden"], side["vocab"])
    if checksum(model) != side["weights_checksum"]:
        raise RuntimeError(f"{path.name}: the rebuilt weights differ from the saved ones "
                           "(another transformers version names or orders them otherwise)")
    decoders = [torch_trt_ref.load(p) for p in (path, path.with_suffix(DECODE))]
    step = _step_model(model, side["precision"], len(decoders[0].shapes))
    for decoder in decoders:
        weightless.restore(decoder.module, step)  # refits the engines in place
    return (model.eval(), *(d.to(device) for d in decoders))


@torch.no_grad()
def accuracy(model, compiled, ids: torch.Tensor, prompt: int, device: str) -> dict:
    """Every step's logits of ``compiled`` along the greedy ``ids`` (its own prefix) against
    the eager model at the compile precision and in float64: the float64 rule per step."""
    at_precision = copy.deepcopy(model).to(device, compiled.dtype)
    double = copy.deepcopy(model).to(device, torch.float64)
    cache = compiled.new_cache(device)
    logits = compiled.step(ids[:, :prompt], 0, cache)
    failed = []
    for i in range(ids.shape[1] - prompt):
        prefix = ids[:, :prompt + i]
        verdict = judge(logits, at_precision(prefix).logits[:, -1], double(prefix).logits[:, -1])
        if not verdict.passed:
            failed.append(f"step {i}: {verdict.message}")
        if prompt + i + 1 < ids.shape[1]:
            logits = compiled.step(ids[:, prompt + i:prompt + i + 1], prompt + i, cache)
    return {"passed": not failed, "steps": ids.shape[1] - prompt, "failed": failed[:5]}


def _variants(model, compiled, decode_only, prompt_ids, device: str) -> dict:
    eager = copy.deepcopy(model).to(device, compiled.dtype)

    def hf(n: int, compile_: bool):
        return eager.generate(prompt_ids, max_new_tokens=n, min_new_tokens=n,
                              do_sample=False, cache_implementation="static",
                              eos_token_id=None, pad_token_id=0, disable_compile=not compile_)

    variants = {"ours_no_graph": lambda n: llm.generate(compiled, prompt_ids, n,
                                                        eos_token_id=None),
                "hf_eager": lambda n: hf(n, False)}
    if device.startswith("cuda"):
        graph = llm.DecodeGraph(decode_only, decode_only.new_cache(device))
        variants["ours_graph"] = lambda n: llm.generate(compiled, prompt_ids, n,
                                                        eos_token_id=None, cuda_graph=graph)
        one = llm.DecodeGraph(compiled, compiled.new_cache(device))
        variants["ours_graph_one_engine"] = lambda n: llm.generate(
            compiled, prompt_ids, n, eos_token_id=None, cuda_graph=one)
        variants["hf_reduce_overhead"] = lambda n: hf(n, True)
    return {k: variants[k] for k in VARIANTS if k in variants}


def measure_decoder(path: Path, device: str, rounds: int) -> dict:
    """One decoder's record: accuracy, tokens equal to transformers eager per variant, and
    per variant and round the time to first token and tokens/s (warm-up first: captures and
    compiles)."""
    side = json.loads(path.with_suffix(".json").read_text())
    prompt, new = side["prompt"], side["new"]
    record = {**side, "kind": "llm_latency", "device": device, "rounds": rounds,
              "status": "ok", "skipped": [] if device.startswith("cuda") else list(CUDA_ONLY)}
    try:
        with torch.no_grad():
            model, compiled, decode_only = _load(path, side, device)
            prompt_ids = torch.randint(0, side["vocab"], (1, prompt),
                                       generator=torch.Generator().manual_seed(1)).to(device)
            variants = _variants(model, compiled, decode_only, prompt_ids, device)
            tokens, record["warmup_s"], record["failed"] = {}, {}, {}
            for name, fn in list(variants.items()):
                start = time.perf_counter()
                try:
                    for n in (new, 1, new):
                        tokens[name] = fn(n)
                except Exception as err:  # recorded; the other variants go on
                    record["failed"][name] = f"{type(err).__name__}: {str(err)[:1500]}"
                    del variants[name]
                    continue
                record["warmup_s"][name] = time.perf_counter() - start
            want = tokens["hf_eager"][0, prompt:]
            record["tokens_equal_hf_eager"] = {k: int((v[0, prompt:] == want).sum())
                                               for k, v in tokens.items() if k != "hf_eager"}
            record["accuracy"] = accuracy(model, compiled, tokens["ours_no_graph"], prompt,
                                          device)
            times = {k: {"ttft_ms": [], "tokens_per_s": []} for k in variants}
            order = list(variants)
            for r in range(rounds):
                for name in order[r % len(order):] + order[:r % len(order)]:
                    fn = variants[name]
                    firsts = [_timed(lambda: fn(1), device)[0] for _ in range(3)]
                    fulls = [_timed(lambda: fn(new), device) for _ in range(3)]
                    assert all(o.shape[1] == prompt + new for _, o in fulls), fulls[0][1].shape
                    times[name]["ttft_ms"].append(statistics.median(firsts) * 1e3)
                    # The decode time is a difference of two timings, so it is taken from the
                    # fastest of 3 each: a disturbed run then no longer decides it (with one run
                    # of all tokens, a 1-layer model's 2 decode steps on a busy CPU read
                    # negative). It can still be negative if every run of one side is slowed.
                    decode = min(t for t, _ in fulls) - min(firsts)
                    times[name]["tokens_per_s"].append((new - 1) / decode)
        record["times"] = {k: {m: {"median": statistics.median(v), "min": min(v),
                                   "max": max(v), "rounds": v} for m, v in t.items()}
                           for k, t in times.items()}
    except Exception as err:  # the run records the failure and goes on
        record.update(status="error", error=f"{type(err).__name__}: {str(err)[:1500]}")
    return record


def passed(record: dict) -> bool:
    return record["status"] == "ok" and record["accuracy"]["passed"]


def _cell(t: dict | None, metric: str, fmt: str) -> str:
    if t is None:
        return "-"
    v = t[metric]
    return f"{v['median']:{fmt}} ({v['min']:{fmt}}-{v['max']:{fmt}})"


def markdown(records: list[dict]) -> str:
    """Per decoder: tokens/s and time to first token of each variant (median (min-max) over
    the rounds), the float64 rule over every step, and the tokens equal to transformers
    eager's."""
    out = ["| decoder | device | float64 rule (steps) | "
           + " | ".join(f"{n} tok/s" for n in VARIANTS) + " | "
           + " | ".join(f"{n} TTFT ms" for n in VARIANTS) + " | tokens equal to hf_eager |",
           "|---" * (2 * len(VARIANTS) + 4) + "|"]
    for r in records:
        if r["status"] != "ok":
            out.append(f"| {r['program']} | {r['device']} | {r['error']} |"
                       + " |" * (2 * len(VARIANTS) + 1))
            continue
        t, acc = r["times"], r["accuracy"]
        rule = f"{'ok' if acc['passed'] else 'FAIL'} ({acc['steps']})"
        out.append(f"| {r['program']} | {r['device']} | {rule} | " + " | ".join(
            _cell(t.get(n), "tokens_per_s", ".0f") for n in VARIANTS) + " | " + " | ".join(
            _cell(t.get(n), "ttft_ms", ".1f") for n in VARIANTS) + " | " + ", ".join(
            f"{n} {v}/{r['new']}" for n, v in r["tokens_equal_hf_eager"].items()) + " |")
    return "\n".join(out) + "\n"
