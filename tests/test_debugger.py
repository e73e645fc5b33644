"""``debug.Debugger`` (docs/debugging.md "The Debugger context"): per-pass FX graphs as
files, engine layer tables, the reference executor's time per layer. Oracles: the graph
files are Python that torch.fx generated and that runs as the model does (eager float64
rule), the layer tables hold what TensorRT inferred (the snapshot's shapes and dtypes,
checked against the compiled outputs), and a module compiled and run inside the context
gives bit-identical outputs to one outside it."""

from __future__ import annotations

import copy
import json

import pytest
import torch

import torch_trt_ref
from torch_trt_ref.accuracy import judge
from torch_trt_ref.debug import PASS_NAMES, Debugger


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.LayerNorm(16),
                               torch.nn.GELU(), torch.nn.Linear(16, 4)).eval()


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    root = tmp_path_factory.mktemp("dbg")
    model, x = _model(), torch.randn(3, 8)
    with Debugger(capture_fx_graph_before=["remove_asserts", "cast_precision"],
                  capture_fx_graph_after=["cast_precision", "fold_constants"],
                  save_layer_info=True, logging_dir=root) as dbg:
        compiled = torch_trt_ref.compile(model, [x], precision="fp16", min_block_size=1)
        inside = [compiled(x) for _ in range(3)]
    outside = torch_trt_ref.compile(model, [x], precision="fp16", min_block_size=1)
    return root, dbg, model, x, compiled, inside, outside


def test_graph_files_around_the_named_passes(session):
    root, *_ = session
    names = sorted(p.name for p in (root / "compile_1" / "lowering").iterdir())
    assert "1_cast_precision_before.py" in names and "1_cast_precision_after.py" in names
    assert any(n.endswith("fold_constants_after.py") for n in names)
    assert not any("before" in n and "fold_constants" in n for n in names)
    before = (root / "compile_1/lowering/1_cast_precision_before.py").read_text()
    after = (root / "compile_1/lowering/1_cast_precision_after.py").read_text()
    assert "torch.float16" not in before and "torch.float16" in after


def test_the_graph_before_lowering_is_runnable_python_of_the_model(session):
    root, _, model, x, *_ = session
    from torch_trt_ref.capture import capture, flat_module

    gm = flat_module(capture(model, [x]))
    code = (root / "compile_1/lowering/1_remove_asserts_before.py").read_text()
    scope: dict = {}
    exec(code, scope)  # the file runs as written
    with torch.no_grad():
        out = scope["forward"](gm, x)
        ref = copy.deepcopy(model).double()(x.double())
        verdict = judge(out[0] if isinstance(out, (tuple, list)) else out, model(x), ref)
    assert verdict.passed, verdict.message


def test_layer_tables_hold_tensorrt_shapes_and_dtypes(session):
    root, _, _, x, compiled, inside, _ = session
    (table,) = (root / "compile_1" / "engines").glob("*.layers.json")
    rows = json.loads(table.read_text())
    engine = next(m.engine for m in compiled.modules() if hasattr(m, "engine"))
    assert len(rows) == engine.layer_count == len(engine.snapshot.layers)
    last = rows[-1]["outputs"][-1]
    assert tuple(last["shape"]) in {tuple(o.shape) for o in
                                    (t for layer in engine.snapshot.layers
                                     for t in layer.outputs)}
    assert any(r["kind"] == "MATRIX_MULTIPLY" for r in rows)
    assert "float16" in (table.parent / table.name.replace(".json", ".txt")).read_text()
    assert tuple(inside[0].shape) == (3, 4)


def test_layer_timing_per_layer_summed_over_calls(session):
    root, dbg, _, _, compiled, _, _ = session
    ((engine, layers),) = dbg.layer_times.items()
    assert all(e["calls"] == 3 and e["seconds"] > 0 for e in layers.values())
    names = {layer.name for m in compiled.modules() if hasattr(m, "engine")
             for layer in m.engine.snapshot.layers}
    assert set(layers) <= names and len(layers) >= 3
    data = json.loads((root / "layer_timing.json").read_text())
    assert set(data[engine]) == set(layers)
    assert "% " in (root / "layer_timing.txt").read_text()


def test_results_inside_equal_results_outside_and_pass_the_rule(session):
    _, _, model, x, compiled, inside, outside = session
    assert all(torch.equal(o, outside(x)) for o in inside)
    with torch.no_grad():
        verdict = judge(inside[0], copy.deepcopy(model).half()(x.half()).float(),
                        copy.deepcopy(model).double()(x.double()))
    assert verdict.passed, verdict.message
    outside(x)  # after the context: no timing recorded
    assert all(e["calls"] == 3 for layers in session[1].layer_times.values()
               for e in layers.values())


def test_each_compile_gets_its_own_folder(tmp_path):
    model, x = _model(), torch.randn(2, 8)
    with Debugger(capture_fx_graph_after=["remove_noops"], logging_dir=tmp_path) as dbg:
        torch_trt_ref.compile(model, [x], min_block_size=1)
        torch_trt_ref.compile(model, [x], min_block_size=1)
    assert dbg.compiles == 2
    assert (tmp_path / "compile_2/lowering/1_remove_noops_after.py").is_file()
    assert not (tmp_path / "compile_1" / "engines").exists()  # save_layer_info off
    assert not (tmp_path / "layer_timing.json").exists()


@pytest.mark.parametrize("kwargs, match", [
    (dict(capture_fx_graph_before=["cast_precison"]), "unknown lowering pass"),
    (dict(capture_fx_graph_after="nosuchpass"), "the passes are"),
])
def test_bad_arguments_are_named(kwargs, match, tmp_path):
    with pytest.raises(ValueError, match=match):
        Debugger(logging_dir=tmp_path, **kwargs)


def test_a_file_as_logging_dir_is_refused(tmp_path):
    (tmp_path / "f").write_text("")
    with pytest.raises(ValueError, match="is a file"):
        Debugger(logging_dir=tmp_path / "f")


def test_pass_names_are_the_pipeline_passes():
    assert {"cast_precision", "fold_constants", "autocast", "split_tied_embeddings"} <= set(
        PASS_NAMES)


def test_timing_can_be_off_and_the_observer_ends_with_the_context(tmp_path):
    from torch_trt_ref import observe

    model, x = _model(), torch.randn(2, 8)
    with Debugger(save_layer_info=True, time_layers=False, logging_dir=tmp_path) as dbg:
        assert observe.current() is dbg
        torch_trt_ref.compile(model, [x], min_block_size=1)(x)
    assert observe.current() is None
    assert dbg.layer_times == {} and not (tmp_path / "layer_timing.json").exists()
    assert list((tmp_path / "compile_1" / "engines").glob("*.layers.txt"))


def test_the_observer_ends_when_the_block_raises(tmp_path):
    from torch_trt_ref import observe

    with pytest.raises(RuntimeError, match="boom"):
        with Debugger(logging_dir=tmp_path):
            raise RuntimeError("boom")
    assert observe.current() is None


def test_segment_passes_are_captured_once_per_engine(tmp_path):
    model, x = _model(), torch.randn(2, 8)
    with Debugger(capture_fx_graph_after=["split_tied_embeddings"], logging_dir=tmp_path):
        torch_trt_ref.compile(model, [x], min_block_size=1,
                              torch_executed_ops={"aten.gelu"})
    files = sorted(p.name for p in (tmp_path / "compile_1" / "lowering").iterdir())
    assert files == ["1_split_tied_embeddings_after.py", "2_split_tied_embeddings_after.py"]


def _code(path):
    return path.read_text().split("\n", 1)[1]  # past the header line naming pass and run


def test_one_pass_s_after_is_the_next_pass_s_before(tmp_path):
    from torch_trt_ref.lowering.pipeline import PASSES

    names = [p.__name__ for p in PASSES]
    first, second = names[1], names[2]  # consecutive in the pipeline
    model, x = _model(), torch.randn(2, 8)
    with Debugger(capture_fx_graph_after=[first], capture_fx_graph_before=[second],
                  logging_dir=tmp_path):
        torch_trt_ref.compile(model, [x], min_block_size=1)
    lowering = tmp_path / "compile_1" / "lowering"
    assert _code(lowering / f"1_{first}_after.py") == _code(lowering / f"1_{second}_before.py")


def test_dynamic_batch_tables_hold_tensorrt_s_runtime_dims(tmp_path):
    from torch_trt_ref import Input

    model = _model()
    with Debugger(save_layer_info=True, logging_dir=tmp_path) as dbg:
        compiled = torch_trt_ref.compile(
            model, [Input(min_shape=(1, 8), opt_shape=(4, 8), max_shape=(6, 8))],
            min_block_size=1)
        outs = {b: compiled(torch.randn(b, 8, generator=torch.Generator().manual_seed(b)))
                for b in (1, 6)}
    (table,) = (tmp_path / "compile_1" / "engines").glob("*.layers.json")
    rows = json.loads(table.read_text())
    assert rows[-1]["outputs"][-1]["shape"] == [-1, 4]  # -1: TensorRT's runtime dim
    ((_, layers),) = dbg.layer_times.items()
    assert {e["calls"] for e in layers.values()} == {2}
    for b, out in outs.items():
        x = torch.randn(b, 8, generator=torch.Generator().manual_seed(b))
        with torch.no_grad():
            verdict = judge(out, model(x), copy.deepcopy(model).double()(x.double()))
        assert verdict.passed, (b, verdict.message)


def test_one_table_per_engine_with_the_engine_s_layer_count(tmp_path):
    model, x = _model(), torch.randn(2, 8)
    with Debugger(save_layer_info=True, logging_dir=tmp_path) as dbg:
        compiled = torch_trt_ref.compile(model, [x], min_block_size=1,
                                         torch_executed_ops={"aten.gelu"})
        compiled(x)
    records = {r.name: r.layers for r in compiled.compile_report.engines}
    assert len(records) == 2
    for name, layers in records.items():
        rows = json.loads((tmp_path / "compile_1/engines" / f"{name}.layers.json").read_text())
        assert len(rows) == layers
    assert set(dbg.layer_times) == set(records)


def test_a_pass_in_the_pipeline_and_per_segment_is_counted_per_run(tmp_path):
    from torch_trt_ref.lowering.pipeline import PASSES, SEGMENT_PASSES

    assert "fold_constants" in {p.__name__ for p in PASSES} & {p.__name__ for p in
                                                                SEGMENT_PASSES}
    model, x = _model(), torch.randn(2, 8)
    with Debugger(capture_fx_graph_after=["fold_constants"], logging_dir=tmp_path):
        compiled = torch_trt_ref.compile(model, [x], min_block_size=1,
                                         torch_executed_ops={"aten.gelu"})
    engines = len(compiled.compile_report.engines)
    files = sorted(p.name for p in (tmp_path / "compile_1" / "lowering").iterdir())
    assert files == [f"{k}_fold_constants_after.py" for k in range(1, 2 + engines)]


def test_bf16_tables_name_the_dtype_the_result_has(tmp_path):
    model, x = _model(), torch.randn(3, 8)
    with Debugger(save_layer_info=True, logging_dir=tmp_path):
        compiled = torch_trt_ref.compile(model, [x], precision="bf16", min_block_size=1)
    (table,) = (tmp_path / "compile_1" / "engines").glob("*.layers.json")
    dtypes = {o["dtype"] for r in json.loads(table.read_text()) for o in r["outputs"]}
    assert "torch.bfloat16" in dtypes
    with torch.no_grad():
        out = compiled(x)
        verdict = judge(out, copy.deepcopy(model).bfloat16()(x.bfloat16()).to(out.dtype),
                        copy.deepcopy(model).double()(x.double()))
    assert verdict.passed, verdict.message


def test_a_loaded_program_is_timed_as_the_compiled_one_and_gives_its_results(tmp_path):
    model, x = _model(), torch.randn(2, 8)
    compiled = torch_trt_ref.compile(model, [x], min_block_size=1)
    loaded = torch_trt_ref.load(torch_trt_ref.save(compiled, tmp_path / "m.trtref"))
    timed = []
    for module in (compiled, loaded):
        with Debugger(logging_dir=tmp_path / "dbg", time_layers=True) as dbg:
            timed.append((module(x), dbg.layer_times))
    (out_c, times_c), (out_l, times_l) = timed
    assert torch.equal(out_l, out_c)
    (layers_c,), (layers_l,) = times_c.values(), times_l.values()
    assert set(layers_l) == set(layers_c) and len(layers_l) >= 3
    assert {e["kind"] for e in layers_l.values()} == {e["kind"] for e in layers_c.values()}


def test_a_second_debugger_starts_its_own_count_and_folder(tmp_path):
    model, x = _model(), torch.randn(2, 8)
    with Debugger(capture_fx_graph_after=["remove_noops"], logging_dir=tmp_path / "a"):
        torch_trt_ref.compile(model, [x], min_block_size=1)
    before = sorted(str(p) for p in (tmp_path / "a").rglob("*"))
    with Debugger(capture_fx_graph_after=["remove_noops"], logging_dir=tmp_path / "b") as dbg:
        torch_trt_ref.compile(model, [x], min_block_size=1)
    assert dbg.compiles == 1 and (tmp_path / "b/compile_1/lowering").is_dir()
    assert sorted(str(p) for p in (tmp_path / "a").rglob("*")) == before
