"""``torch_trt_ref.llm``: a decoder over a static KV cache compiled into one engine with
decode and prefill profiles; greedy generation equal, token for token, to transformers'
own ``generate(do_sample=False, cache_implementation="static")`` (library-default
attention, random weights from small configs); the cache is written in place (the caller's
buffers, no cache-sized copy)."""

from __future__ import annotations

import copy

import pytest
import torch
import transformers as tf
from host_values import HostValues
from torch.utils._python_dispatch import TorchDispatchMode

import torch_trt_ref
import torch_trt_ref.llm as llm
from torch_trt_ref.accuracy import judge

PROMPT, NEW = 8, 12
SMALL = dict(vocab_size=97, max_position_embeddings=64)
CONFIGS = {
    "gpt2": lambda: tf.GPT2LMHeadModel(tf.GPT2Config(
        n_layer=2, n_embd=32, n_head=2, vocab_size=97, n_positions=64)),
    "llama": lambda: tf.LlamaForCausalLM(tf.LlamaConfig(
        num_hidden_layers=2, hidden_size=32, intermediate_size=64, num_attention_heads=4,
        num_key_value_heads=2, **SMALL)),
    "qwen2": lambda: tf.Qwen2ForCausalLM(tf.Qwen2Config(
        num_hidden_layers=2, hidden_size=32, intermediate_size=64, num_attention_heads=4,
        num_key_value_heads=2, **SMALL)),
    "qwen3": lambda: tf.Qwen3ForCausalLM(tf.Qwen3Config(
        num_hidden_layers=2, hidden_size=32, intermediate_size=64, num_attention_heads=4,
        num_key_value_heads=2, head_dim=8, **SMALL)),
    # sliding_window 4 < prompt: every layer slides, and the window is crossed
    "mistral": lambda: tf.MistralForCausalLM(tf.MistralConfig(
        num_hidden_layers=2, hidden_size=32, intermediate_size=64, num_attention_heads=4,
        num_key_value_heads=2, head_dim=8, sliding_window=4, **SMALL)),
    # sliding_window 4 < prompt: layer 0 is a sliding layer whose window the test crosses
    "gemma3": lambda: tf.Gemma3ForCausalLM(tf.Gemma3TextConfig(
        num_hidden_layers=2, hidden_size=32, intermediate_size=64, num_attention_heads=4,
        num_key_value_heads=2, head_dim=8, sliding_window=4,
        layer_types=["sliding_attention", "full_attention"], **SMALL)),
}


def _model(name):
    torch.manual_seed(0)
    return CONFIGS[name]().eval()


_COMPILED: dict = {}


def _compiled(name):
    """``name`` compiled once per test session (max_seq_len PROMPT + NEW, fp32)."""
    if name not in _COMPILED:
        model = _model(name)
        _COMPILED[name] = model, llm.compile(model, max_seq_len=PROMPT + NEW,
                                             max_prompt_len=PROMPT, executor="reference")
    return _COMPILED[name]


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_greedy_equals_transformers_static_cache(name):
    model, compiled = _compiled(name)
    assert compiled.compile_report.counts == {"tensorrt": 1}
    ids = torch.randint(3, 97, (1, PROMPT), generator=torch.Generator().manual_seed(1))
    ours = llm.generate(compiled, ids, max_new_tokens=NEW, eos_token_id=None)
    with torch.no_grad():
        theirs = model.generate(ids, max_new_tokens=NEW, do_sample=False, eos_token_id=None,
                                cache_implementation="static", pad_token_id=0)
    assert ours.tolist() == theirs.tolist()


@pytest.mark.parametrize("name", ["llama", "gemma3"])
def test_fp16_tokens_and_every_steps_logits_against_float64(name):
    """fp16: the new tokens equal transformers' fp16 static-cache generate at all but at
    most 2 positions (the issue's 126 of 128, scaled), and each step's logits, given the
    compiled run's own prefix, pass the float64 rule against the eager model. (Gemma3's
    post-feedforward RMSNorm must stay in float32, as eager keeps it: tests/test_upcast.py;
    in fp16 one of 128 steps failed the rule.)"""
    model = _model(name)
    compiled = llm.compile(model, max_seq_len=PROMPT + NEW, max_prompt_len=PROMPT,
                           precision="fp16", executor="reference")
    assert compiled.compile_report.kv_cache.dtype == "float16"
    ids = torch.randint(3, 97, (1, PROMPT), generator=torch.Generator().manual_seed(1))
    ours = llm.generate(compiled, ids, max_new_tokens=NEW, eos_token_id=None)
    half, double = copy.deepcopy(model).half(), copy.deepcopy(model).double()
    with torch.no_grad():
        theirs = half.generate(ids, max_new_tokens=NEW, do_sample=False, eos_token_id=None,
                               cache_implementation="static", pad_token_id=0)
    assert (ours != theirs).sum() <= 2
    cache = compiled.new_cache()
    logits = compiled.step(ours[:, :PROMPT], 0, cache)
    for i in range(NEW):
        prefix = ours[:, :PROMPT + i]
        with torch.no_grad():
            verdict = judge(logits, half(prefix).logits[:, -1], double(prefix).logits[:, -1])
        assert verdict.passed, f"step {i}: {verdict.message}"
        if i < NEW - 1:
            logits = compiled.step(ours[:, PROMPT + i:PROMPT + i + 1], PROMPT + i, cache)


@pytest.mark.parametrize("precision", ["int8", "nvfp4"])
def test_quantized_decoding_equals_eager_quantized_model(precision):
    """An INT8 (weights and activations) or NVFP4 (block-scaled FP4) quantized model
    (torch_trt_ref.quantize, Q/DQ in the graph) decodes like the eager quantized model (its
    fake-quant semantics, DESIGN D13): at least 11 of 12 new tokens (the issue's 120 of
    128, scaled)."""
    gen = torch.Generator().manual_seed(1)
    calibration = [(torch.randint(3, 97, (1, PROMPT), generator=gen),) for _ in range(4)]
    quantized = torch_trt_ref.quantize(_model("llama"), calibration, precision=precision,
                                       progress=False)
    compiled = llm.compile(quantized, max_seq_len=PROMPT + NEW, max_prompt_len=PROMPT,
                           executor="reference")
    assert compiled.compile_report.counts == {"tensorrt": 1}
    assert compiled.compile_report.kv_cache.in_place == 4
    ids = torch.randint(3, 97, (1, PROMPT), generator=torch.Generator().manual_seed(2))
    ours = llm.generate(compiled, ids, max_new_tokens=NEW, eos_token_id=None)
    with torch.no_grad():
        theirs = quantized.generate(ids, max_new_tokens=NEW, do_sample=False,
                                    eos_token_id=None, cache_implementation="static",
                                    pad_token_id=0)
    assert (ours[:, PROMPT:] == theirs[:, PROMPT:]).sum() >= NEW - 1


class _Allocations(TorchDispatchMode):
    """The shape of every tensor an op allocates (outputs sharing no input's storage)."""

    def __init__(self):
        super().__init__()
        self.sizes: list[tuple[str, int]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        storages = {a.untyped_storage().data_ptr() for a in args if isinstance(a, torch.Tensor)}
        for t in out if isinstance(out, (tuple, list)) else [out]:
            if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in storages:
                self.sizes.append((str(func), tuple(t.shape)))
        return out


def test_cache_written_in_place_without_copy():
    _, compiled = _compiled("llama")
    report = compiled.compile_report.kv_cache
    assert (report.in_place, report.layers, report.profiles) == (4, 2, 2)
    (engine,) = compiled.compile_report.engines  # the compile report says so too
    assert sorted(engine.aliases.values()) == ["k0", "k1", "v0", "v1"]
    assert engine.profiles == 2
    cache = compiled.new_cache()
    pointers = [t.data_ptr() for t in cache]
    compiled.step(torch.tensor([[5, 6, 7]]), 0, cache)  # prefill: profile 1
    with _Allocations() as seen:
        compiled.step(torch.tensor([[8]]), 3, cache)  # decode: profile 0
    assert [t.data_ptr() for t in cache] == pointers
    assert all(bool(t[:, :, :4].abs().sum()) and not t[:, :, 4:].any() for t in cache)
    big = [(op, shape) for op, shape in seen.sizes if shape == tuple(cache[0].shape)]
    assert not big, f"cache-sized allocations in a decode step: {big}"


def test_prefill_and_decode_profiles_and_limits():
    _, compiled = _compiled("gpt2")  # max_seq_len 20, max_prompt_len 8
    engine = next(m for m in compiled.module.modules() if hasattr(m, "handle"))
    cache = compiled.new_cache()
    compiled.step(torch.tensor([[1, 2, 3]]), 0, cache)
    assert engine.handle.last_profile == 1
    compiled.step(torch.tensor([[4]]), 3, cache)
    assert engine.handle.last_profile == 0
    with pytest.raises(ValueError, match="outside any optimization profile"):
        compiled.step(torch.ones(1, 9, dtype=torch.long), 0, cache)
    with pytest.raises(ValueError, match="max_seq_len=20"):
        compiled.step(torch.tensor([[4]]), 20, cache)


def test_sampling_with_seeded_generator_repeats():
    _, compiled = _compiled("gpt2")
    ids = torch.tensor([[1, 2, 3, 4]])
    runs = [llm.generate(compiled, ids, max_new_tokens=6, do_sample=True, eos_token_id=None,
                         generator=torch.Generator().manual_seed(7)) for _ in range(2)]
    assert runs[0].tolist() == runs[1].tolist() and runs[0].shape == (1, 10)


def test_cli_llm_run(capsys):
    from torch_trt_ref.cli import main

    assert main(["llm", "run", "gpt2", "--prompt-len", "4", "--new-tokens", "3",
                 "--executor", "reference", "--hidden", "32"]) == 0
    out = capsys.readouterr().out
    assert "time to first token" in out and "tokens/s" in out and "peak memory" in out
    assert "7 ids" in out


_LOADED_RUN = """
import json, sys
sys.modules["tensorrt"] = sys.modules["tensorrt_rtx"] = None  # loading needs no TensorRT
import torch, torch_trt_ref, torch_trt_ref.llm as llm
compiled = torch_trt_ref.load(sys.argv[1])
ids = torch.tensor(json.loads(sys.argv[2]))
cache = compiled.new_cache()
pointers = [t.data_ptr() for t in cache]
compiled.step(ids, 0, cache)
written = [bool(t[:, :, :ids.shape[1]].abs().sum()) and not t[:, :, ids.shape[1]:].any()
           for t in cache]
out = llm.generate(compiled, ids, max_new_tokens=int(sys.argv[3]), eos_token_id=None)
print(json.dumps({"tokens": out.tolist(), "written": written, "executor": compiled.executor,
                  "same_buffers": [t.data_ptr() for t in cache] == pointers,
                  "eos": compiled.config.eos_token_id, "config": type(compiled.config).__name__}))
"""


@pytest.mark.parametrize("plans", [False, True])
def test_save_and_load_in_a_fresh_process(tmp_path, plans):
    """``torch_trt_ref.save`` / ``load`` of a compiled decoder: the loaded one, in a fresh
    process with TensorRT blocked (``plans=False``; with plans it still loads there and runs
    on the reference executor), generates the tokens the saved one did, writing the
    caller's cache buffers in place."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    model, compiled = _compiled("llama")
    ids = torch.randint(3, 97, (1, PROMPT), generator=torch.Generator().manual_seed(3))
    before = llm.generate(compiled, ids, max_new_tokens=NEW, eos_token_id=None)
    path = torch_trt_ref.save(compiled, tmp_path / "llama.ttrt", plans=plans)
    run = subprocess.run([sys.executable, "-c", _LOADED_RUN, str(path),
                          json.dumps(ids.tolist()), str(NEW)], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])},
                         timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    assert got["tokens"] == before.tolist()
    assert got["written"] == [True] * 4 and got["same_buffers"]
    assert got["executor"] == "reference"
    assert (got["config"], got["eos"]) == ("LlamaConfig", model.config.eos_token_id)


def test_load_rejects_a_damaged_decoder_file(tmp_path):
    import zipfile

    _, compiled = _compiled("gpt2")
    path = torch_trt_ref.save(compiled, tmp_path / "gpt2.ttrt", plans=False)
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(tmp_path / "bad.ttrt", "w") as dst:
        dst.writestr("llm_decoder.json", src.read("llm_decoder.json"))
    with pytest.raises(torch_trt_ref.SerializationError, match="program.trtref"):
        torch_trt_ref.load(tmp_path / "bad.ttrt")


def test_decode_graph_binds_the_callers_cache():
    """``DecodeGraph`` (Note [Decode graph]) with a stand-in capture (the step itself, run
    at each replay): its decode steps read the token and position from its own buffers,
    write the caller's cache, and give generate's tokens. On a CPU cache it refuses."""
    from torch_trt_ref.llm.graphs import DecodeGraph

    _, compiled = _compiled("llama")
    ids = torch.randint(3, 97, (1, PROMPT), generator=torch.Generator().manual_seed(4))
    want = llm.generate(compiled, ids, max_new_tokens=NEW, eos_token_id=None)
    cache = compiled.new_cache()
    pointers = [t.data_ptr() for t in cache]
    captured = []
    graph = DecodeGraph(compiled, cache, capture=lambda fn: captured.append(fn) or fn)
    tokens = [compiled.step(ids, 0, cache).argmax(-1, keepdim=True)]
    for i in range(NEW - 1):
        tokens.append(graph(tokens[-1], PROMPT + i).argmax(-1, keepdim=True))
    assert torch.cat([ids, *tokens], 1).tolist() == want.tolist()
    assert len(captured) == 1 and graph.calls == NEW - 1
    assert [t.data_ptr() for t in cache] == pointers
    assert all(t[:, :, PROMPT + NEW - 2].abs().sum() > 0 and not t[:, :, -1].any()
               for t in cache)
    with pytest.raises(ValueError, match="max_seq_len=20"):
        graph(tokens[-1], PROMPT + NEW)
    again = llm.generate(compiled, ids, max_new_tokens=NEW, eos_token_id=None,
                         cuda_graph=graph)  # its cache again, already written: same tokens
    assert again.tolist() == want.tolist() and len(captured) == 1
    with pytest.raises(ValueError, match="needs the cache on a CUDA device"):
        llm.generate(compiled, ids, max_new_tokens=2, cuda_graph=True)
    # decode steps of a decode-only (static-shape) compile over the same cache
    decode_only = llm.compile(_model("llama"), max_seq_len=PROMPT + NEW, max_prompt_len=1,
                              executor="reference")
    graph = DecodeGraph(decode_only, decode_only.new_cache(), capture=lambda fn: fn)
    both = llm.generate(compiled, ids, max_new_tokens=NEW, eos_token_id=None, cuda_graph=graph)
    assert both.tolist() == want.tolist() and graph.calls == NEW - 1
    _, other = _compiled("gpt2")
    with pytest.raises(ValueError, match="does not fit this decoder"):
        llm.generate(other, ids, max_new_tokens=2, cuda_graph=graph)


def test_decode_graph_captures_the_two_profile_engines_step_with_shapes_resolved():
    """Note [Shapes resolved before capture]: ``DecodeGraph`` over the two-profile engine
    with a stand-in capture (the step run once, as ``cuda_capture`` warms up, then at each
    replay under a recorder): its replays run with the shape values kept from the first run,
    so none makes a tensor from host values or reads one back (each SHAPE layer did), and
    every step's logits equal the plain replay's bit for bit."""
    from torch_trt_ref.llm.graphs import DecodeGraph
    from torch_trt_ref.runtime.module import EngineModule

    _, compiled = _compiled("llama")
    ids = torch.randint(3, 97, (1, PROMPT), generator=torch.Generator().manual_seed(6))
    plain_cache, cache = compiled.new_cache(), compiled.new_cache()
    recorder = HostValues()

    def stand_in(fn):
        fn()

        def replay():
            with recorder:
                return fn()
        return replay

    graph = DecodeGraph(compiled, cache, capture=stand_in)
    token = compiled.step(ids, 0, cache).argmax(-1, keepdim=True)
    assert torch.equal(token, compiled.step(ids, 0, plain_cache).argmax(-1, keepdim=True))
    for i in range(NEW - 1):
        with HostValues() as plain:
            want = compiled.step(token, PROMPT + i, plain_cache)
        assert plain.seen  # the premise: the plain replay makes shape tensors on the host
        got = graph(token, PROMPT + i)
        assert torch.equal(got, want), f"step {i}"
        token = got.argmax(-1, keepdim=True)
    assert recorder.seen == [] and graph.calls == NEW - 1
    assert all(torch.equal(a, b) for a, b in zip(cache, plain_cache))
    (engine,) = [m for m in compiled.module.modules() if isinstance(m, EngineModule)]
    (resolved,) = engine.handle._reference.resolved.values()
    prepared = engine.handle._reference.prepared.fast_layers  # every SHAPE layer replayed
    assert sum(layer.kind == "SHAPE" for layer in resolved.left_out) == sum(
        layer.kind == "SHAPE" for layer in prepared) > 0  # is computed once, left out
    assert len(resolved.calls) + len(resolved.left_out) == len(prepared)


@pytest.mark.parametrize("name", ["gpt2", "gemma3"])
def test_batch_of_two_equals_transformers(name):
    """``batch_size=2``, prompts of equal length: greedy tokens equal transformers'
    static-cache ``generate`` of the same batch; with an end token one sequence meets
    early, the finished sequence gets pad tokens as transformers gives it."""
    model = _model(name)
    compiled = llm.compile(model, max_seq_len=PROMPT + NEW, max_prompt_len=PROMPT,
                           batch_size=2, executor="reference")
    assert compiled.compile_report.kv_cache.shape[0] == 2
    ids = torch.randint(3, 97, (2, PROMPT), generator=torch.Generator().manual_seed(5))
    ours = llm.generate(compiled, ids, max_new_tokens=NEW, eos_token_id=None)
    with torch.no_grad():
        theirs = model.generate(ids, max_new_tokens=NEW, do_sample=False, eos_token_id=None,
                                cache_implementation="static", pad_token_id=0)
    assert ours.tolist() == theirs.tolist()
    eos = int(ours[0, PROMPT + 2])  # sequence 0 ends at its third new token
    ours = llm.generate(compiled, ids, max_new_tokens=NEW, eos_token_id=eos, pad_token_id=1)
    with torch.no_grad():
        theirs = model.generate(ids, max_new_tokens=NEW, do_sample=False, eos_token_id=eos,
                                cache_implementation="static", pad_token_id=1)
    assert ours.tolist() == theirs.tolist() and ours[0, PROMPT + 3:].eq(1).all()
    with pytest.raises(ValueError, match=r"must be \[2, prompt_len\]"):
        llm.generate(compiled, ids[:1], max_new_tokens=2)


def test_resolved_decode_reads_on_the_host_only_values_it_kept_there(monkeypatch):
    """What a CPU run can show of a host read under a real capture: in the resolved decode
    step every ``tolist`` (a SLICE's start and stride, a SHUFFLE's dims: TensorRT's
    shape-tensor inputs) reads a tensor the resolution kept, never a value the replay just
    made (on a GPU that read is a device-to-host copy, which a capture refuses: the first
    H200 capture failed so on the integer constants a SLICE reads)."""
    from torch_trt_ref.llm.graphs import DecodeGraph
    from torch_trt_ref.runtime.module import EngineModule

    _, compiled = _compiled("llama")
    (engine,) = [m for m in compiled.module.modules() if isinstance(m, EngineModule)]
    kept, fresh, replaying = set(), [], [False]
    plain = torch.Tensor.tolist

    def tolist(self):
        if replaying[0] and id(self) not in kept:
            fresh.append(tuple(self.shape))
        return plain(self)

    def stand_in(fn):
        fn()
        for resolved in engine.handle._reference.resolved.values():
            kept.update(id(v) for v in resolved.template if isinstance(v, torch.Tensor))

        def replay():
            replaying[0] = True
            try:
                return fn()
            finally:
                replaying[0] = False
        return replay

    monkeypatch.setattr(torch.Tensor, "tolist", tolist)
    cache = compiled.new_cache()
    graph = DecodeGraph(compiled, cache, capture=stand_in)
    ids = torch.randint(3, 97, (1, PROMPT), generator=torch.Generator().manual_seed(7))
    token = compiled.step(ids, 0, cache).argmax(-1, keepdim=True)
    for i in range(3):
        token = graph(token, PROMPT + i).argmax(-1, keepdim=True)
    assert kept and graph.calls == 3
    assert fresh == [], f"{len(fresh)} host reads of values made during the replay: {fresh[:4]}"
