"""The zoo registry: every entry is well formed; the small ones build, run eagerly and are
deterministic (big models are exercised by the zoo sweep, not by unit tests)."""

import pytest
import torch

from torch_trt_ref import Input
from zoo.entry import ZooEntry
from zoo.matrix import Cell, quick_matrix
from zoo.registry import QUICK, ZOO, get

SMALL = ["lgamma_graph", "unconvertible", "bert_2layer", "gpt2_2layer", "bert_2layer_eager",
         "gpt2_2layer_eager", "llama_2layer", "qwen2_2layer", "t5_2layer"]
PUBLISHED = ["resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0",
             "convnext_tiny", "vit_b_16", "swin_t", "bert_base", "gpt2", "t5_small", "vit_base",
             "whisper_tiny_encoder", "llama_100m", "bart_base"]
EAGER_VARIANTS = {"bert_2layer_eager", "gpt2_2layer_eager"}


def test_zoo_has_the_issue_models():
    assert set(PUBLISHED + SMALL) <= set(ZOO)
    assert set(QUICK) <= set(ZOO)
    assert {name for name, e in ZOO.items() if "quick" in e.tags} == set(QUICK)


def _hf_model(module: torch.nn.Module):
    return next(m for m in module.modules() if hasattr(m, "config"))


@pytest.mark.parametrize("name", [n for n in SMALL if "transformers" in ZOO[n].tags])
def test_transformers_entries_use_the_library_defaults(name):
    """Models as users build them: attention as transformers picks it (sdpa), except the
    variants tagged eager_attention; only decoder-only models turn the KV cache off."""
    config = _hf_model(get(name).factory()).config
    if name in EAGER_VARIANTS:
        assert {"variant", "eager_attention"} <= set(get(name).tags)
        assert config._attn_implementation == "eager"
    else:
        assert config._attn_implementation == "sdpa"
    decoder_only = name.split("_")[0] in {"gpt2", "llama", "qwen2"}
    assert config.use_cache is not decoder_only  # a DynamicCache output does not export


def test_eager_attention_variants_are_tagged():
    tagged = {n for n, e in ZOO.items() if "eager_attention" in e.tags}
    assert tagged == EAGER_VARIANTS and not tagged & set(QUICK)


def test_quick_matrix_runs_every_quick_text_model_with_dynamic_shapes():
    cells = quick_matrix()
    dynamic = {c.model for c in cells if c.dynamic}
    text = {n for n in QUICK if "transformers" in ZOO[n].tags}
    assert text == dynamic == {"bert_2layer", "gpt2_2layer", "llama_2layer", "qwen2_2layer",
                               "t5_2layer"}
    assert {c.model for c in cells if not c.is_llm} == set(QUICK)
    assert len({c.key for c in cells}) == len(cells) == 34


def test_a_cell_precision_is_a_compile_precision_or_a_quantization_format():
    """A quantized cell compiles in fp32 and uses the fp32 tolerance; its record keeps the
    precision as ``--precisions`` named it (no new keys)."""
    int8, fp16 = Cell("resnet18", "fast", "int8"), Cell("resnet18", "fast", "fp16")
    assert (int8.quant_format, int8.compile_precision) == ("int8", "fp32")
    assert (fp16.quant_format, fp16.compile_precision) == (None, "fp16")
    assert get("resnet18").tolerance("int8") == get("resnet18").tolerance("fp32")
    assert int8.to_json() == {"model": "resnet18", "strategy": "fast", "precision": "int8",
                              "resource_partitioning": False, "budget_fraction": 0.35,
                              "dynamic": False, "key": "resnet18/fast/int8"}


def test_the_gpu_set_and_its_larger_sizes_are_zoo_entries():
    from zoo.registry import GPU, LARGER_OF

    assert set(GPU) <= set(ZOO) and set(LARGER_OF) <= set(GPU)
    for large, small in LARGER_OF.items():  # same architecture, one size smaller
        assert small in ZOO and ZOO[small].tags[0] == ZOO[large].tags[0]


@pytest.mark.parametrize("name", sorted(ZOO))
def test_entry_is_well_formed(name):
    entry = ZOO[name]
    assert entry.name == name
    assert entry.description
    assert set(entry.tolerances) == {"fp32", "fp16", "bf16"}
    assert entry.tolerances["fp32"] <= entry.tolerances["fp16"] <= entry.tolerances["bf16"]
    args, kwargs = entry.inputs()
    assert isinstance(args, tuple) and isinstance(kwargs, dict)
    if entry.dynamic is not None:
        specs, kw_specs = entry.dynamic
        assert len(specs) == len(args) and set(kw_specs) == set(kwargs)
        for spec, value in zip(specs, args):
            assert isinstance(spec, Input) and spec.contains(tuple(value.shape))
            assert spec.dtype == value.dtype


def test_get_unknown_name_lists_the_known_ones():
    with pytest.raises(KeyError, match="resnet18") as info:
        get("resnet19")
    assert "no zoo model 'resnet19'" in str(info.value)


@pytest.mark.parametrize("name", SMALL)
def test_small_entry_builds_runs_and_is_deterministic(name):
    entry = get(name)
    a, b = entry.factory(), entry.factory()
    assert not a.training
    for (ka, va), (kb, vb) in zip(a.state_dict().items(), b.state_dict().items()):
        assert ka == kb and torch.equal(va, vb), f"{name}: {ka} differs between two builds"
    args, kwargs = entry.inputs()
    args2, _ = entry.inputs()
    assert all(torch.equal(x, y) for x, y in zip(args, args2))
    with torch.no_grad():
        out = a(*args, **kwargs)
    leaves = [t for t in torch.utils._pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]
    floats = [t for t in leaves if t.is_floating_point()]
    assert floats and all(torch.isfinite(t).all() for t in floats)
    assert max(float(t.abs().max()) for t in floats) > 1e-2, "degenerate (near-zero) output"


def test_lgamma_graph_matches_seed_000():
    model = get("lgamma_graph").factory()
    (x, y), _ = get("lgamma_graph").inputs()
    expected = torch.cat([torch.lgamma(x), torch.lgamma(y), torch.lgamma(x / y), x + y, x * y])
    torch.testing.assert_close(model(x, y), expected)


def test_weight_bytes_counts_tied_storage_once():
    class Tied(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(4, 3)  # 12 + 3 floats
            self.b = torch.nn.Linear(4, 3, bias=False)
            self.b.weight = self.a.weight  # tied: not counted again
            self.register_buffer("h", torch.zeros(5, dtype=torch.float16))  # 10 bytes

    assert ZooEntry.weight_bytes(Tied()) == (12 + 3) * 4 + 10


def test_gpt2_2layer_ties_lm_head_to_embedding():
    model = get("gpt2_2layer").factory()
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    embedding = model.transformer.wte.weight
    assert model.lm_head.weight.data_ptr() == embedding.data_ptr()
    assert ZooEntry.weight_bytes(model) <= params + sum(
        b.numel() * b.element_size() for b in model.buffers())
