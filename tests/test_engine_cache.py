"""The engine cache (design D8): hits skip the builder, keys follow the network's structure
(not its weights: a hit with other weights is refit), corrupt entries are rebuilt with a
warning, LRU eviction keeps the size limit."""

import json
import warnings

import pytest
import torch

import torch_trt_ref
from torch_trt_ref import CompilationSettings
from torch_trt_ref.engine_cache import EngineCache, _FileWriter
from torch_trt_ref.runtime.module import EngineModule


def _model(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(),
                               torch.nn.Linear(16, 4)).eval()


def _compile(model, cache_dir):
    x = torch.randn(3, 8)
    compiled = torch_trt_ref.compile(model, [x], min_block_size=1, engine_cache_dir=str(cache_dir))
    (engine,) = [m.engine for _, m in compiled.named_modules() if isinstance(m, EngineModule)]
    torch.testing.assert_close(compiled(x), model(x), atol=1e-5, rtol=1e-5)
    return compiled, engine


def test_engine_cache_dir_turns_caching_on_and_default_is_off():
    assert CompilationSettings().engine_cache_path is None
    assert CompilationSettings(engine_cache_dir="/tmp/x").engine_cache_path == "/tmp/x"
    assert CompilationSettings(cache_engines=True).engine_cache_path.endswith("engines")


def test_second_compile_of_the_same_network_is_a_cache_hit(tmp_path):
    model = _model()
    first, e1 = _compile(model, tmp_path)
    second, e2 = _compile(model, tmp_path)
    assert not e1.cache_hit and e2.cache_hit
    assert not e2.cache_refit and e2.plan_current  # same weights: the plan is used as is
    assert e2.plan == e1.plan and e2.nbytes == e1.nbytes > 0
    assert second.compile_report.engines[0].cache_hit
    assert "from the engine cache" in second.compile_report.render()
    assert len(list(tmp_path.glob("*.plan"))) == 1


def test_other_weights_are_a_refit_hit_other_settings_a_different_entry(tmp_path):
    _, first = _compile(_model(0), tmp_path)
    assert not first.cache_refit
    # the key leaves the weights out: a hit, refit (``_compile`` checks it against eager)
    _, other_weights = _compile(_model(1), tmp_path)
    assert other_weights.cache_hit and other_weights.cache_refit
    x = torch.randn(3, 8)
    compiled = torch_trt_ref.compile(_model(0), [x], min_block_size=1, optimization_level=1,
                                     engine_cache_dir=str(tmp_path))
    assert not compiled.compile_report.engines[0].cache_hit
    assert len(list(tmp_path.glob("*.plan"))) == 2


@pytest.mark.parametrize("damage", ["flip_plan_byte", "truncate_plan", "garbage_metadata"])
def test_a_corrupt_entry_warns_and_is_rebuilt(tmp_path, damage):
    model = _model()
    _, first = _compile(model, tmp_path)
    original = first.plan
    (plan_path,) = tmp_path.glob("*.plan")
    plan_path.unlink()  # damage a copy: ``first`` keeps the original file open
    data = bytearray(original)
    if damage == "flip_plan_byte":
        data[len(data) // 2] ^= 0xFF
        plan_path.write_bytes(bytes(data))
    elif damage == "truncate_plan":
        plan_path.write_bytes(bytes(data[:100]))
    else:
        plan_path.write_bytes(original)
        plan_path.with_suffix(".json").write_text("{not json")
    with pytest.warns(UserWarning, match="corrupt"):
        _, rebuilt = _compile(model, tmp_path)
    assert not rebuilt.cache_hit and rebuilt.plan == original
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the rebuilt entry is intact again
        _, again = _compile(model, tmp_path)
    assert again.cache_hit


def _store(cache: EngineCache, key: str, nbytes: int):
    def build(file):
        writer = _FileWriter(file)
        writer.write(bytes([len(key)]) * nbytes)
        return writer
    return cache.build(key, build)


def test_least_recently_used_entries_are_evicted_beyond_the_size_limit(tmp_path):
    cache = EngineCache(tmp_path, max_bytes=250)
    a = _store(cache, "a", 100)
    _store(cache, "bb", 100)
    assert cache.lookup("a") is not None  # "a" is now more recent than "bb"
    _store(cache, "ccc", 100)
    assert sorted(k for k, _, _ in cache.entries()) == ["a", "ccc"]
    meta = json.loads((tmp_path / "a.json").read_text())
    assert meta["nbytes"] == 100
    # a PlanFile stays readable after its entry is evicted
    _store(cache, "dddd", 200)
    assert "a" not in {k for k, _, _ in cache.entries()}
    assert a.read() == bytes([1]) * 100


def test_a_failed_build_leaves_no_entry(tmp_path):
    cache = EngineCache(tmp_path, max_bytes=1 << 20)
    assert cache.build("k", lambda file: None) is None
    assert list(tmp_path.iterdir()) == []


def test_main_job_command_reuses_the_cache(tmp_path, capsys):
    from torch_trt_ref.cli import main

    argv = ["compile", "lgamma_graph", "--min-block-size", "1", "--cache-dir", str(tmp_path)]
    assert main(argv) == 0
    assert "from the engine cache" not in capsys.readouterr().out
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.count("from the engine cache") == 2  # both TensorRT segments of the graph
    assert "accuracy vs eager float64: RMSE" in out and "passes" in out


def test_a_plan_still_being_written_is_not_an_entry(tmp_path):
    cache = EngineCache(tmp_path, max_bytes=10)
    (tmp_path / ".building_x.plan").write_bytes(b"0" * 100)  # another compile's build
    _store(cache, "a", 5)
    assert [k for k, _, _ in cache.entries()] == ["a"]
    assert (tmp_path / ".building_x.plan").exists()
