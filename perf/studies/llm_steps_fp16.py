"""docs/llm.md's 32 + 128 table, one row: greedy tokens of a compiled 2-layer decoder against
transformers' static-cache ``generate`` in the same precision, and every step's logits,
given the compiled run's own prefix, judged by the float64 rule (torch_trt_ref.accuracy).

    PYTHONPATH=$PWD python perf/studies/llm_steps_fp16.py gemma3 fp16 [PROMPT NEW]

With ``STEPS_JSON=FILE`` each step's compiled and eager RMSE against float64 and the allowed
RMSE are written to FILE."""

from __future__ import annotations

import copy
import json
import os
import sys
import time

import torch
import transformers as tf

import torch_trt_ref.llm as llm
from torch_trt_ref.accuracy import judge

SMALL = dict(num_hidden_layers=2, hidden_size=32, intermediate_size=64, num_attention_heads=4,
             num_key_value_heads=2, head_dim=8, vocab_size=97, max_position_embeddings=512)
CONFIGS = {
    "gpt2": lambda: tf.GPT2LMHeadModel(tf.GPT2Config(
        n_layer=2, n_embd=32, n_head=4, vocab_size=97, n_positions=512)),
    "llama": lambda: tf.LlamaForCausalLM(tf.LlamaConfig(**SMALL)),
    "qwen3": lambda: tf.Qwen3ForCausalLM(tf.Qwen3Config(**SMALL)),
    "gemma3": lambda: tf.Gemma3ForCausalLM(tf.Gemma3TextConfig(
        **SMALL, sliding_window=16, layer_types=["sliding_attention", "full_attention"])),
}
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}


def main(name: str, precision: str, prompt: int = 32, new: int = 128) -> None:
    torch.manual_seed(0)
    model = CONFIGS[name]().eval()
    start = time.perf_counter()
    compiled = llm.compile(model, max_seq_len=prompt + new, max_prompt_len=prompt,
                           precision=precision, executor="reference")
    print(f"compiled in {time.perf_counter() - start:.1f}s", flush=True)
    ids = torch.randint(3, 97, (1, prompt), generator=torch.Generator().manual_seed(1))
    ours = llm.generate(compiled, ids, max_new_tokens=new, eos_token_id=None)
    low = copy.deepcopy(model).to(DTYPES[precision])
    double = copy.deepcopy(model).double()
    with torch.no_grad():
        theirs = low.generate(ids, max_new_tokens=new, do_sample=False, eos_token_id=None,
                              cache_implementation="static", pad_token_id=0)
    equal = int((ours[:, prompt:] == theirs[:, prompt:]).sum())
    print(f"{name} {precision}: tokens equal {equal}/{new}")
    cache = compiled.new_cache()
    logits = compiled.step(ours[:, :prompt], 0, cache)
    worst, failed, rmses, ratios, steps = (0.0, -1, None), [], [], [], []
    for i in range(new):
        prefix = ours[:, :prompt + i]
        with torch.no_grad():
            v = judge(logits, low(prefix).logits[:, -1], double(prefix).logits[:, -1])
        out = v.outputs[0]
        ratio = out.compiled_rmse / out.allowed_rmse
        rmses.append(out.compiled_rmse)
        steps.append([out.compiled_rmse, out.eager_rmse, out.allowed_rmse])
        ratios.append(out.compiled_rmse / out.eager_rmse)
        if ratio > worst[0]:
            worst = (ratio, i, out)
        if not v.passed:
            failed.append(i)
            print(f"step {i}: {v.message}")
        if i < new - 1:
            logits = compiled.step(ours[:, prompt + i:prompt + i + 1], prompt + i, cache)
    if os.environ.get("STEPS_JSON"):
        with open(os.environ["STEPS_JSON"], "w") as f:
            json.dump({"model": name, "precision": precision, "tokens_equal": equal,
                       "steps": steps}, f)
    ratio, i, out = worst
    print(f"steps failing the float64 rule: {len(failed)}/{new} {failed}; worst step {i}: "
          f"RMSE {out.compiled_rmse:.3g} / allowed {out.allowed_rmse:.3g} = {ratio:.3f} "
          f"(eager RMSE {out.eager_rmse:.3g}); max RMSE over steps {max(rmses):.3g}; "
          f"compiled/eager RMSE median {sorted(ratios)[len(ratios) // 2]:.2f}, "
          f"max {max(ratios):.2f}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], *map(int, sys.argv[3:]))
