"""Refit (design D11): ``torch_trt_ref.refit`` puts new weights into a compiled module
without the builder; the result equals a fresh compile of the new weights (the slow route
it replaces) and the float64 rule against the new model in eager; weights that do not fit
are named; the engine cache keys without weights and refits on a hit."""

import copy
import pickle

import pytest
import torch

import torch_trt_ref
from torch_trt_ref.accuracy import judge, tensors
from torch_trt_ref.refit import RefitError
from torch_trt_ref.runtime.module import EngineModule
from torch_trt_ref.runtime.refitter import plans_refittable
from torch_trt_ref.weights import WeightProgramError, WeightTracer

torchvision = pytest.importorskip("torchvision")
transformers = pytest.importorskip("transformers")


def _resnet18(seed: int) -> torch.nn.Module:
    """Random weights and batch-norm statistics from one random batch (seeded), so two
    seeds differ in every weight the converters fold (scale = w / sqrt(var + eps))."""
    torch.manual_seed(seed)
    model = torchvision.models.resnet18()
    for module in model.modules():
        if isinstance(module, torch.nn.BatchNorm2d):
            module.momentum = None
    with torch.no_grad():
        model.train()(torch.randn(4, 3, 64, 64))
    return model.eval()


def _bert(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    config = transformers.BertConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=2,
                                     intermediate_size=128, vocab_size=100)
    return transformers.BertModel(config).eval()


def _same(a, b) -> bool:
    return all(torch.equal(x, y) for x, y in zip(tensors(a), tensors(b), strict=True))


def _engines(compiled):
    return [m.engine for m in compiled.modules() if isinstance(m, EngineModule)]


@pytest.fixture(scope="module")
def resnet():
    x = torch.randn(1, 3, 64, 64, generator=torch.Generator().manual_seed(1))
    old, new = _resnet18(0), _resnet18(1)
    compiled = torch_trt_ref.compile(old, [x])
    fresh = torch_trt_ref.compile(new, [x])
    return x, old, new, compiled, fresh


def test_refit_resnet18_equals_a_fresh_compile_and_the_new_model(resnet):
    x, old, new, compiled, fresh = resnet
    before = compiled(x)
    assert torch_trt_ref.refit(compiled, new) is compiled
    after = compiled(x)
    assert _same(after, fresh(x))  # same engine structure, so exactly equal
    assert not torch.equal(after, before)
    with torch.no_grad():
        verdict = judge(after, new(x), copy.deepcopy(new).double()(x.double()))
    assert verdict.passed, verdict.message
    # the plan follows the snapshot where TensorRT can refit it, else it is marked stale
    (engine,) = _engines(compiled)
    # the refit map names every parameter and statistic the engine's weights come from
    # (batch norm's folded scale and shift included); only the unused counters are absent
    assert set(engine.refit_map) == {k for k in new.state_dict()
                                     if not k.endswith("num_batches_tracked")}
    assert engine.plan_current == plans_refittable()
    if not plans_refittable():
        with pytest.raises(RuntimeError, match="old weights"):
            engine.runnable_plan()
    torch_trt_ref.refit(compiled, old.state_dict())  # and back, from a state dict
    assert _same(compiled(x), before)


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_refit_bert_equals_a_fresh_compile(precision):
    ids = torch.randint(0, 100, (1, 16), generator=torch.Generator().manual_seed(2))
    old, new = _bert(0), _bert(1)
    compiled = torch_trt_ref.compile(old, [ids], precision=precision)
    fresh = torch_trt_ref.compile(new, [ids], precision=precision)
    before = compiled(ids)
    torch_trt_ref.refit(compiled, new)
    after = compiled(ids)
    assert _same(after, fresh(ids))
    assert not _same(after, before)
    if precision == "fp32":
        with torch.no_grad():
            eager = new(ids)
            verdict = judge(after, eager, copy.deepcopy(new).double()(ids))
        assert verdict.passed, verdict.message


def test_mismatched_weights_are_named(resnet):
    _, old, _, compiled, _ = resnet
    state = old.state_dict()
    missing = {k: v for k, v in state.items() if k != "fc.bias"}
    with pytest.raises(RefitError, match=r"missing keys: fc\.bias"):
        torch_trt_ref.refit(compiled, missing)
    with pytest.raises(RefitError, match=r"unexpected keys .*: head\.weight"):
        torch_trt_ref.refit(compiled, {**state, "head.weight": torch.zeros(2)})
    wrong = {**state, "conv1.weight": torch.zeros(64, 3, 3, 3)}
    with pytest.raises(RefitError, match=r"conv1\.weight: shape \(64, 3, 3, 3\) does not "
                                         r"match the compiled shape \(64, 3, 7, 7\)"):
        torch_trt_ref.refit(compiled, wrong)
    ints = {**state, "fc.bias": torch.zeros(1000, dtype=torch.int64)}
    with pytest.raises(RefitError, match=r"fc\.bias: dtype torch\.int64 cannot stand for"):
        torch_trt_ref.refit(compiled, ints)
    with pytest.raises(TypeError, match="compile"):
        torch_trt_ref.refit(old, state)


def test_a_weight_read_as_a_python_value_refuses_new_weights():
    weight = torch.ones(3)
    tracer = WeightTracer({"w": weight})
    with tracer:
        doubled = weight * 2 if bool(weight.sum() > 0) else weight
    tracer.output("out", doubled)
    program = pickle.loads(pickle.dumps(tracer.finish()))  # programs are saved with modules
    assert torch.equal(program.run({"w": torch.full((3,), 2.0)})["out"], torch.full((3,), 4.0))
    with pytest.raises(WeightProgramError, match="fresh compile"):
        program.run({"w": -torch.ones(3)})


def test_replay_keeps_writes_views_and_index_kinds():
    """The program replays in-place writes (into a weight and into a constant), views of a
    weight made outside the tracer, and tuple vs list indices, as the compile ran them."""
    weight, table = torch.arange(12.0).reshape(3, 4), torch.zeros(3, 4)
    tracer = WeightTracer({"w": weight})
    with tracer:
        rows = weight[[0, 2]]  # list index: rows 0 and 2
        corner = weight[(0, 2)]  # tuple index: one element
        doubled = weight.clone()
        doubled.mul_(2)
        table[1] = weight[1]  # a constant written with a weight's row
        table.add_(weight)  # and added to: replayed on a copy from before the writes
    late_view = weight.t()  # outside the tracer: found by its storage
    for key, value in {"rows": rows, "corner": corner, "doubled": doubled, "table": table,
                       "late_view": late_view}.items():
        assert tracer.output(key, value), key
    new = -torch.arange(12.0).reshape(3, 4) - 1
    got = pickle.loads(pickle.dumps(tracer.finish())).run({"w": new})
    assert torch.equal(got["rows"], new[[0, 2]]) and torch.equal(got["corner"], new[0, 2])
    assert torch.equal(got["doubled"], 2 * new) and torch.equal(got["late_view"], new.t())
    assert torch.equal(got["table"],
                       torch.stack([torch.zeros(4), new[1], torch.zeros(4)]) + new)


def test_cache_hit_with_other_weights_is_refit_not_stale(tmp_path):
    ids = torch.randint(0, 100, (1, 16), generator=torch.Generator().manual_seed(3))
    first, second = _bert(0), _bert(1)
    cached_first = torch_trt_ref.compile(first, [ids], engine_cache_dir=str(tmp_path))
    cached_second = torch_trt_ref.compile(second, [ids], engine_cache_dir=str(tmp_path))
    fresh_second = torch_trt_ref.compile(second, [ids])
    (record,) = cached_second.compile_report.engines
    assert record.cache_hit and record.cache_refit
    assert "engine cache hit + refit" in cached_second.compile_report.render()
    assert len(list(tmp_path.glob("*.plan"))) == 1
    assert _same(cached_second(ids), fresh_second(ids))
    assert not _same(cached_second(ids), cached_first(ids))


def test_refit_after_load(tmp_path):
    """A loaded program refits like the original: it then equals a fresh compile of the new
    weights, and a refit program saves and loads with them."""
    ids = torch.randint(0, 100, (1, 16), generator=torch.Generator().manual_seed(4))
    compiled = torch_trt_ref.compile(_bert(0), [ids])
    loaded = torch_trt_ref.load(torch_trt_ref.save(compiled, tmp_path / "bert.ttr"))
    torch_trt_ref.refit(loaded, _bert(1))
    fresh = torch_trt_ref.compile(_bert(1), [ids])
    assert _same(loaded(ids), fresh(ids)) and not _same(loaded(ids), compiled(ids))
    again = torch_trt_ref.load(torch_trt_ref.save(loaded, tmp_path / "refit.ttr"))
    assert _same(again(ids), fresh(ids))


def test_non_finite_weights_are_refit_with_a_warning_naming_them():
    """Issue 36 item 9: eager computes with NaN weights too, so refit takes them, but warns
    which weights hold them; the outputs equal eager's, NaN for NaN."""
    import warnings

    model, x = torch.nn.Linear(4, 3).eval(), torch.randn(2, 4)
    compiled = torch_trt_ref.compile(model, [x], min_block_size=1)
    new = copy.deepcopy(model)
    with torch.no_grad():
        new.weight[0, 1] = float("nan")
        new.bias[2] = float("inf")
    with pytest.warns(UserWarning, match=r"refit: the new weights hold non-finite values "
                      r"\(NaN/inf\): weight \(1 of 12\), bias \(1 of 3\); the module's outputs "
                      r"hold them where eager's do"):
        torch_trt_ref.refit(compiled, new)
    torch.testing.assert_close(compiled(x), new(x), equal_nan=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # finite weights: no warning
        torch_trt_ref.refit(compiled, model)
    torch.testing.assert_close(compiled(x), model(x))
