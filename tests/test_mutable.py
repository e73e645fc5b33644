"""``MutableModule`` (docs/deploy.md "Weights that change"): a compiled model that follows its
model's weights. Oracles: a fresh compile of peft's own merged model (``merge_and_unload``:
bit-identical, same engines), that merged model in float64 (the accuracy rule), and, for
which engines a swap must refit, the engines whose weights differ between fresh compiles of
the two adapters. Run as a script, it prints the refit's CPU time as a ratio of a compile.
"""

from __future__ import annotations

import copy
import statistics
import sys
import warnings

import pytest
import torch

import torch_trt_ref
from torch_trt_ref.accuracy import judge, tensors
from torch_trt_ref.mutable import RecompileWarning
from torch_trt_ref.runtime.module import EngineModule

transformers = pytest.importorskip("transformers")
peft = pytest.importorskip("peft")

# split at every RMSNorm / LayerNorm statistic, so the model is several engines and a LoRA
# swap touches some of them only
LLAMA_SETTINGS = {"torch_executed_ops": {"aten.rsqrt.default"}, "min_block_size": 1}
BERT_SETTINGS = {"torch_executed_ops": {"aten.native_layer_norm.default",
                                        "aten.layer_norm.default"}, "min_block_size": 1}


def _lora(targets, seed, **kw):
    torch.manual_seed(seed)
    return peft.LoraConfig(r=4, lora_alpha=8, target_modules=targets,
                           init_lora_weights=False, **kw)


def _llama(seed=0):
    torch.manual_seed(seed)
    config = transformers.LlamaConfig(num_hidden_layers=2, hidden_size=32,
                                      intermediate_size=64, num_attention_heads=2,
                                      num_key_value_heads=2, vocab_size=64, use_cache=False)
    model = peft.get_peft_model(transformers.LlamaForCausalLM(config).eval(),
                                _lora(["q_proj", "v_proj"], seed + 1), adapter_name="one")
    model.add_adapter("two", _lora(["q_proj", "v_proj"], seed + 2))
    return model.eval()


def _bert(seed=0):
    torch.manual_seed(seed)
    config = transformers.BertConfig(num_hidden_layers=2, hidden_size=32, num_attention_heads=2,
                                     intermediate_size=64, vocab_size=64)
    model = peft.get_peft_model(transformers.BertModel(config, add_pooling_layer=False).eval(),
                                _lora(["query", "value"], seed + 1), adapter_name="one")
    model.add_adapter("two", _lora(["query"], seed + 2, layers_to_transform=[1]))
    return model.eval()


def _ids(n=8, seed=3):
    return torch.randint(0, 64, (1, n), generator=torch.Generator().manual_seed(seed))


def _fresh(model, inputs, settings):
    """The oracle route: peft's own merge of the active adapter(s), compiled from scratch."""
    return torch_trt_ref.compile(copy.deepcopy(model).merge_and_unload(), inputs, **settings)


def _same(a, b) -> bool:
    return all(torch.equal(x, y) for x, y in zip(tensors(a), tensors(b), strict=True))


def _engine_weights(compiled) -> dict[str, list[torch.Tensor]]:
    return {name: [v for layer in m.engine.snapshot.layers for v in layer.attrs.values()
                   if isinstance(v, torch.Tensor)]
            for name, m in compiled.named_modules() if isinstance(m, EngineModule)}


def _differing_engines(one, other) -> list[str]:
    a, b = _engine_weights(one), _engine_weights(other)
    assert a.keys() == b.keys()
    return sorted(n for n in a if not all(torch.equal(x, y) for x, y in zip(a[n], b[n])))


def _judge64(out, model, ids):
    merged = copy.deepcopy(model).merge_and_unload()
    with torch.no_grad():
        return judge(out, merged(ids), copy.deepcopy(merged).double()(ids))


@pytest.fixture(scope="module", params=["llama", "bert"])
def swap(request):
    """A -> B -> A through one MutableModule, with fresh compiles of A and B as oracles."""
    model, settings = ((_llama(), LLAMA_SETTINGS) if request.param == "llama"
                       else (_bert(), BERT_SETTINGS))
    ids = _ids()
    mm = torch_trt_ref.MutableModule(model, **settings)
    with torch.no_grad():
        steps = [("a", mm(ids), copy.deepcopy(mm.last_update))]
        fresh = {"a": _fresh(model, (ids,), settings)}
        judged = {"a": _judge64(steps[0][1], model, ids)}
        model.set_adapter("two")
        steps.append(("b", mm(ids), copy.deepcopy(mm.last_update)))
        fresh["b"] = _fresh(model, (ids,), settings)
        judged["b"] = _judge64(steps[1][1], model, ids)
        model.set_adapter("one")
        steps.append(("a", mm(ids), copy.deepcopy(mm.last_update)))
    return request.param, model, mm, ids, steps, fresh, judged


def test_compiles_lazily_at_the_first_call(swap):
    _, _, mm, _, steps, _, _ = swap
    assert steps[0][2].action == "compile"
    assert mm.compile_count == 1  # A -> B -> A refit, never recompiled
    lazy = torch_trt_ref.MutableModule(torch.nn.Linear(4, 4))
    assert lazy.compiled is None and lazy.compile_report is None


def test_each_adapter_equals_a_fresh_compile_of_peft_merged_model(swap):
    _, _, _, ids, steps, fresh, _ = swap
    for adapter, out, _ in steps:
        assert _same(out, fresh[adapter](ids)), adapter


def test_a_after_b_leaves_nothing_of_b(swap):
    _, _, _, _, steps, _, _ = swap
    assert _same(steps[2][1], steps[0][1])  # bit-identical to the first A
    assert not _same(steps[1][1], steps[0][1])


def test_each_adapter_passes_the_float64_rule_against_peft_merged(swap):
    _, _, _, _, _, _, judged = swap
    for adapter, verdict in judged.items():
        assert verdict.passed, (adapter, verdict.message)


def test_a_swap_refits_exactly_the_engines_whose_weights_differ(swap):
    name, _, mm, _, steps, fresh, _ = swap
    differ = _differing_engines(fresh["a"], fresh["b"])
    engines = [n for n, m in mm.compiled.named_modules() if isinstance(m, EngineModule)]
    assert 0 < len(differ) < len(engines), (name, differ, engines)
    for _, _, update in steps[1:]:
        assert update.action == "refit"
        assert update.engines == differ


def test_the_refit_entries_are_the_lora_weights(swap):
    name, model, _, _, steps, _, _ = swap
    targets = {"llama": ("q_proj", "v_proj"), "bert": ("query", "value")}[name]
    entries = steps[1][2].entries
    assert entries and all(e.endswith(".weight") and any(t in e for t in targets)
                           for e in entries)
    assert all("lora" not in e and "base_layer" not in e for e in entries)


def test_no_change_no_refit(swap):
    _, _, mm, ids, _, _, _ = swap
    mm(ids)
    assert mm.last_update.action == "none"


@pytest.fixture()
def llama():
    return _llama(), _ids()


def test_load_adapter_then_set_adapter(tmp_path, llama):
    model, ids = llama
    model.save_pretrained(tmp_path, selected_adapters=["two"])
    other = _llama(seed=10)  # other base weights and adapters; "b" comes from the file
    other.delete_adapter("two")
    mm = torch_trt_ref.MutableModule(other, **LLAMA_SETTINGS)
    mm(ids)
    other.load_adapter(str(tmp_path / "two"), adapter_name="two")
    mm(ids)
    assert mm.last_update.action == "none"  # loaded, not active: the weights are the same
    other.set_adapter("two")
    out = mm(ids)
    assert mm.last_update.action == "refit" and mm.compile_count == 1
    assert _same(out, _fresh(other, (ids,), LLAMA_SETTINGS)(ids))


def test_merge_adapter_refits_nothing_and_unmerge_refits(llama):
    model, ids = llama
    mm = torch_trt_ref.MutableModule(model, **LLAMA_SETTINGS)
    before = mm(ids)
    model.merge_adapter()  # W += delta in place: the weights the engines hold already
    assert _same(mm(ids), before) and mm.last_update.action == "none"
    model.unmerge_adapter()  # W -= delta: not W again in floating point
    model.set_adapter("two")
    out = mm(ids)
    assert mm.last_update.action == "refit"
    assert _same(out, _fresh(model, (ids,), LLAMA_SETTINGS)(ids))


def test_load_state_dict_of_a_checkpoint_refits_only_its_engines(llama):
    model, ids = llama
    merged = copy.deepcopy(model).merge_and_unload()
    mm = torch_trt_ref.MutableModule(merged, **LLAMA_SETTINGS)
    mm(ids)
    state = {k: v.clone() for k, v in merged.state_dict().items()}
    state["model.layers.1.mlp.down_proj.weight"] += 0.5
    mm.load_state_dict(state)
    out = mm(ids)
    assert mm.last_update.entries == ["model.layers.1.mlp.down_proj.weight"]
    assert len(mm.last_update.engines) == 1
    oracle = torch_trt_ref.compile(merged, (ids,), **LLAMA_SETTINGS)
    assert _same(out, oracle(ids))
    mm.load_state_dict(state)  # the same values again: versions move, values do not
    mm(ids)
    assert mm.last_update.action == "none"


def test_an_assigned_parameter_is_refit():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    x = torch.randn(2, 8)
    mm = torch_trt_ref.MutableModule(model.eval(), x, min_block_size=1)
    mm(x)
    model[2].weight = torch.nn.Parameter(torch.randn(4, 16))
    out = mm(x)
    assert mm.last_update.action == "refit"
    assert mm.last_update.entries == ["2.weight"]
    verdict = judge(out, model(x), copy.deepcopy(model).double()(x.double()))
    assert verdict.passed, verdict.message


def test_a_shape_change_recompiles_with_a_warning(llama):
    model, ids = llama
    mm = torch_trt_ref.MutableModule(model, **LLAMA_SETTINGS)
    mm(ids)
    short = _ids(5)
    with pytest.warns(RecompileWarning, match=r"input 0 has shape \(1, 5\), compiled for "
                                              r"\(1, 8\)"):
        out = mm(short)
    assert mm.last_update.action == "recompile" and mm.compile_count == 2
    assert _same(out, _fresh(model, (short,), LLAMA_SETTINGS)(short))


def test_a_dtype_or_structure_change_recompiles_naming_it():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Embedding(10, 8), torch.nn.Linear(8, 16),
                                torch.nn.ReLU(), torch.nn.Linear(16, 4)).eval()
    x = torch.randint(0, 10, (2, 5))
    mm = torch_trt_ref.MutableModule(model, min_block_size=1)
    mm(x)
    with pytest.warns(RecompileWarning, match="input 0 has dtype torch.int32, compiled for "
                                              "torch.int64"):
        mm(x.int())
    model[2] = torch.nn.GELU().eval()
    with pytest.warns(RecompileWarning, match="modules changed.*GELU"):
        out = mm(x.int())
    verdict = judge(out, model(x), copy.deepcopy(model).double()(x))
    assert verdict.passed, verdict.message
    model[3] = torch.nn.Linear(16, 3).eval()
    with pytest.warns(RecompileWarning, match=r"weight 3.weight changed from \(4, 16\)"):
        assert mm(x.int()).shape == (2, 5, 3)
    assert mm.compile_count == 4


def test_dynamic_shape_range_serves_every_size_without_recompiling(llama):
    model, _ = llama
    mm = torch_trt_ref.MutableModule(model, **LLAMA_SETTINGS)
    mm.set_expected_dynamic_shape_range(({1: {"min": 2, "opt": 6, "max": 12}},))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RecompileWarning)
        for n in (6, 2, 12, 7):
            out = mm(_ids(n))
            oracle = copy.deepcopy(model).merge_and_unload()(_ids(n))
            assert torch.allclose(out.logits, oracle.logits, atol=1e-5), n
    assert mm.compile_count == 1
    with pytest.warns(RecompileWarning, match=r"shape \(1, 13\), compiled for min="):
        mm(_ids(13))  # outside: compiled again for the range widened to 2..13
    mm(_ids(3))
    assert mm.compile_count == 2 and mm.last_update.action == "none"


@pytest.mark.parametrize("bad, match", [
    (({"1": {"min": 1, "opt": 2, "max": 3}},), "a dynamic dim is"),
    (({1: {"min": 1, "max": 3}},), "a dynamic dim is"),
    (({1: {"min": 4, "opt": 2, "max": 3}},), "min <= opt <= max"),
])
def test_bad_dynamic_ranges_are_named(bad, match):
    mm = torch_trt_ref.MutableModule(torch.nn.Linear(4, 4))
    with pytest.raises(ValueError, match=match):
        mm.set_expected_dynamic_shape_range(bad)


def test_bad_arguments_are_named():
    with pytest.raises(TypeError, match="wraps an nn.Module"):
        torch_trt_ref.MutableModule(lambda x: x)
    with pytest.raises(ValueError, match="unknown settings 'precison'"):
        torch_trt_ref.MutableModule(torch.nn.Linear(4, 4), precison="fp16")
    with pytest.raises(ValueError, match="has not compiled yet"):
        torch_trt_ref.save(torch_trt_ref.MutableModule(torch.nn.Linear(4, 4)), "x.trtref")


def test_dora_adapters_are_refused_with_the_reason():
    torch.manual_seed(0)
    model = peft.get_peft_model(torch.nn.Sequential(torch.nn.Linear(8, 8)),
                                peft.LoraConfig(r=2, target_modules=["0"], use_dora=True))
    with pytest.raises(NotImplementedError, match="use_dora"):
        torch_trt_ref.MutableModule(model)(torch.randn(2, 8))


def test_save_load_keeps_it_mutable(tmp_path, llama):
    model, ids = llama
    mm = torch_trt_ref.MutableModule(model, **LLAMA_SETTINGS)
    before = mm(ids)
    path = torch_trt_ref.save(mm, tmp_path / "mutable.trtref")
    loaded = torch_trt_ref.load(path)
    assert isinstance(loaded, torch_trt_ref.MutableModule)
    assert _same(loaded(ids), before) and loaded.last_update.action == "none"
    loaded.set_adapter("two")  # the loaded model's peft API, through the wrapper
    out = loaded(ids)
    assert loaded.last_update.action == "refit" and loaded.compile_count == 1
    assert _same(out, _fresh(loaded.model, (ids,), LLAMA_SETTINGS)(ids))
    plain = torch_trt_ref.save(mm.compiled, tmp_path / "plain.trtref")  # still a program
    assert _same(torch_trt_ref.load(plain)(ids), before)


def _ratios(model_fn, settings, rounds: int = 5) -> list[float]:
    """Refit CPU seconds / compile CPU seconds, per A <-> B swap, in one process."""
    model, ids = model_fn(), _ids()
    mm = torch_trt_ref.MutableModule(model, **settings)
    mm(ids)
    compile_s = mm.last_update.cpu_seconds
    out = []
    for i in range(rounds):
        model.set_adapter(("two", "one")[i % 2])
        mm(ids)
        out.append(mm.last_update.cpu_seconds / compile_s)
    return out


if __name__ == "__main__":  # python tests/test_mutable.py: the refit/compile CPU ratio
    for label, fn, settings in [("llama", _llama, LLAMA_SETTINGS),
                                ("bert", _bert, BERT_SETTINGS)]:
        ratios = [r for _ in range(3) for r in _ratios(fn, settings)]
        print(f"{label}: refit/compile CPU median {statistics.median(ratios):.4f}, "
              f"min {min(ratios):.4f}, max {max(ratios):.4f} over {len(ratios)} swaps",
              file=sys.stdout)
