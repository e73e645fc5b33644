"""The public API's arguments swept with mistakes (issue 36): wrong types, empty values,
non-finite tensors and typos for ``quantize``, ``refit``, ``save`` / ``load``, ``Input``,
``CompilationSettings`` / ``compile``, and the CLI's ``zoo`` and ``perf`` commands. Each
row is a call and what it must give: an exception type with a regex on its message (a
clear error naming what was wrong and what is accepted), or a documented result that
matches eager. Tiny models only; the CLI rows end in argparse or a check before any work.
"""

from __future__ import annotations

import re

import pytest
import torch

import torch_trt_ref as ttr
from torch_trt_ref import CompilationSettings, Input, RefitError, quantize
from torch_trt_ref.cli import main as cli_main


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(),
                               torch.nn.Linear(16, 4)).eval()


DATA = [torch.randn(2, 16, generator=torch.Generator().manual_seed(i)) for i in range(2)]
NAN = torch.full((2, 16), float("nan"))


def q(*args, **kwargs):
    return quantize(*args, progress=False, **kwargs)


# (id, call, exception type, regex on the message)
QUANTIZE = [
    ("model str", lambda: q("resnet18", DATA), TypeError,
     r"quantize: model must be a torch.nn.Module, got str"),
    ("data None", lambda: q(_mlp(), None), TypeError,
     r"calibration_data must be an iterable of batches \(each a tensor, a tuple of positional "
     r"inputs or a dict of keyword inputs\), got NoneType"),
    ("data int", lambda: q(_mlp(), 3), TypeError, r"calibration_data must be an iterable .* "
                                                   r"got int"),
    ("data empty", lambda: q(_mlp(), []), ValueError, r"calibration_data is empty; pass at "
                                                      r"least one batch"),
    ("precision typo", lambda: q(_mlp(), DATA, precision="in8"), ValueError,
     r"precision='in8' is not one of int8, fp8, nvfp4 \(did you mean 'int8'\?\)"),
    ("precision case", lambda: q(_mlp(), DATA, precision="FP8"), ValueError,
     r"precision='FP8' is not one of int8, fp8, nvfp4 \(did you mean 'fp8'\?\)"),
    ("precision None", lambda: q(_mlp(), DATA, precision=None), ValueError,
     r"precision=None is not one of int8, fp8, nvfp4"),
    ("compile precision", lambda: q(_mlp(), DATA, precision="fp16"), ValueError,
     r"precision='fp16' is not one of int8, fp8, nvfp4"),
    ("algorithm typo", lambda: q(_mlp(), DATA, algorithm="entopy"), ValueError,
     r"algorithm='entopy' is not one of max, percentile, entropy \(did you mean 'entropy'\?\)"),
    ("percentile str", lambda: q(_mlp(), DATA, percentile="99"), ValueError,
     r"percentile='99' must be a number in \(0, 100\]"),
    ("percentile nan", lambda: q(_mlp(), DATA, percentile=float("nan")), ValueError,
     r"percentile=nan must be a number in \(0, 100\]"),
    ("percentile 0", lambda: q(_mlp(), DATA, percentile=0), ValueError,
     r"percentile=0 must be a number in \(0, 100\]"),
    ("skip typo", lambda: q(_mlp(), DATA, skip=["3"]), ValueError,
     r"skip names no module of the model: '3'; skip takes names of model.named_modules"),
    ("skip int", lambda: q(_mlp(), DATA, skip=[2]), TypeError,
     r"skip takes module names \(str\)"),
    ("skip all", lambda: q(_mlp(), DATA, skip=["0", "2"]), ValueError,
     r"no Linear or Conv/ConvTranspose layer left to quantize \(skip=\['0', '2'\]\)"),
    ("nan batch", lambda: q(_mlp(), [DATA[0], NAN]), ValueError,
     r"layer '0', input quantizer: calibration batch 1 \(counting from 0\) holds 32 "
     r"non-finite values"),
    ("nan only, percentile", lambda: q(_mlp(), [NAN], algorithm="percentile"), ValueError,
     r"every calibration value it saw was non-finite"),
    ("attention nvfp4", lambda: q(_mlp(), DATA, precision="nvfp4", attention=True), ValueError,
     r"attention=True takes precision 'int8' or 'fp8'"),
    ("attention without attention", lambda: q(_mlp(), DATA, attention=True), ValueError,
     r"attention=True, but the model calls no scaled_dot_product_attention"),
    ("batch of a wrong shape", lambda: q(_mlp(), [torch.randn(2, 5)]), RuntimeError,
     r"mat1 and mat2 shapes cannot be multiplied"),  # eager's own error (+ a note, below)
]


@pytest.mark.parametrize("call, kind, match", [c[1:] for c in QUANTIZE],
                         ids=[c[0] for c in QUANTIZE])
def test_quantize(call, kind, match):
    with pytest.raises(kind, match=match):
        call()


def test_quantize_names_the_batch_where_the_model_raised():
    with pytest.raises(RuntimeError) as info:
        q(_mlp(), [DATA[0], torch.randn(2, 5)])
    assert info.value.__notes__ == ["(raised by the model in quantize's calibration batch 1, "
                                    "counting from 0)"]


def test_quantize_takes_a_tensor_or_a_dict_as_one_batch():
    """Documented: a tensor alone is one batch (not its rows), as is a dict of keyword
    inputs; both give the amax of that batch."""
    x = DATA[0]
    for data in (x, {"input": x}, [x], (b for b in [x])):
        model = q(_mlp(), data)
        assert model.quantization["batches"] == 1
        assert float(model[0].input_quantizer.amax) == float(x.abs().max())


# -- refit ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def linear():
    model = torch.nn.Linear(4, 3).eval()
    return model, ttr.compile(model, (torch.randn(2, 4),), min_block_size=1)


REFIT = [
    ("not compiled", lambda m, c: ttr.refit(m, m), TypeError,
     r"refit takes a module returned by torch_trt_ref.compile; Linear has no weight program"),
    ("weights None", lambda m, c: ttr.refit(c, None), TypeError,
     r"refit takes an nn.Module or a state dict \(name -> tensor\), not NoneType"),
    ("empty dict", lambda m, c: ttr.refit(c, {}), RefitError, r"missing keys: weight, bias"),
    ("key typo", lambda m, c: ttr.refit(c, {"weigth": m.weight, "bias": m.bias}), RefitError,
     r"missing keys: weight\n  unexpected keys \(not in the compiled model\): weigth \(did you "
     r"mean 'weight'\?\)"),
    ("not a tensor", lambda m, c: ttr.refit(c, {"weight": 1.0, "bias": m.bias}), RefitError,
     r"state dict entries must be tensors; not: \['weight'\]"),
    ("shape", lambda m, c: ttr.refit(c, torch.nn.Linear(5, 3)), RefitError,
     r"weight: shape \(3, 5\) does not match the compiled shape \(3, 4\)"),
    ("int dtype", lambda m, c: ttr.refit(c, {"weight": torch.ones(3, 4, dtype=torch.int64),
                                             "bias": m.bias}), RefitError,
     r"weight: dtype torch.int64 cannot stand for the compiled torch.float32"),
    ("other architecture", lambda m, c: ttr.refit(c, _mlp()), RefitError,
     r"missing keys: weight, bias\n  unexpected keys .*: 0.weight"),
]


@pytest.mark.parametrize("call, kind, match", [c[1:] for c in REFIT],
                         ids=[c[0] for c in REFIT])
def test_refit(linear, call, kind, match):
    model, compiled = linear
    with pytest.raises(kind, match=match):
        call(model, compiled)
    x = torch.randn(2, 4)
    torch.testing.assert_close(compiled(x), model(x))  # a refused refit changes nothing


def test_refit_with_non_finite_weights_warns_and_matches_eager(linear):
    model, compiled = linear
    bad = {"weight": model.weight.detach().clone(), "bias": torch.full((3,), float("inf"))}
    with pytest.warns(UserWarning, match=r"non-finite values \(NaN/inf\): bias \(3 of 3\)"):
        ttr.refit(compiled, bad)
    x = torch.randn(2, 4)
    torch.testing.assert_close(compiled(x), torch.nn.functional.linear(x, **bad))
    ttr.refit(compiled, model)


# -- save / load ------------------------------------------------------------------------------
def test_save_and_load(linear, tmp_path):
    model, compiled = linear
    (tmp_path / "a_file").write_text("x")
    cases = [
        (lambda: ttr.save(model, tmp_path / "m.ttrt"), TypeError,
         r"torch_trt_ref.save takes a module returned by torch_trt_ref.compile or "
         r"torch_trt_ref.load, got Linear"),
        (lambda: ttr.save("m", tmp_path / "m.ttrt"), TypeError, r"got str"),
        (lambda: ttr.save(compiled, None), TypeError, r"path must be a str or os.PathLike"),
        (lambda: ttr.save(compiled, tmp_path), IsADirectoryError, r"is a folder"),
        (lambda: ttr.save(compiled, ""), IsADirectoryError, r"'.' is a folder"),
        (lambda: ttr.save(compiled, tmp_path / "no" / "m.ttrt"), FileNotFoundError,
         r"the folder '.*/no' does not exist; create it first"),
        (lambda: ttr.load(None), TypeError, r"torch_trt_ref.load: path must be a str"),
        (lambda: ttr.load(tmp_path), IsADirectoryError, r"is a folder"),
        (lambda: ttr.load(tmp_path / "none.ttrt"), FileNotFoundError, r"none.ttrt does not "
                                                                      r"exist"),
        (lambda: ttr.load(tmp_path / "a_file"), ttr.SerializationError,
         r"a_file is not a complete torch_trt_ref program file"),
    ]
    for call, kind, match in cases:
        with pytest.raises(kind, match=match):
            call()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file"]


# -- Input ------------------------------------------------------------------------------------
INPUT = [
    ("nothing", {}, ValueError, r"give shape=\(...\) for a static input, or min_shape, "
                                r"opt_shape and max_shape for a range"),
    ("shape int", {"shape": 3}, TypeError, r"shape must be a sequence of ints, like "
                                           r"\(1, 3, 224, 224\); got 3"),
    ("shape str", {"shape": "1x3"}, TypeError, r"shape must be a sequence of ints"),
    ("float dim", {"shape": (2.5, 3)}, TypeError, r"shape must be a sequence of ints.*2.5"),
    ("negative dim", {"shape": (2, -1)}, ValueError, r"negative dimension in \(2, -1\); a dim "
                                                     r"of any size is declared by a range"),
    ("min only", {"min_shape": (1, 3)}, ValueError, r"needs all of min_shape, opt_shape and "
                                                    r"max_shape"),
    ("min above max", {"min_shape": (4,), "opt_shape": (4,), "max_shape": (2,)}, ValueError,
     r"dim 0 needs 0 <= min <= opt <= max, got 4, 4, 2"),
    ("ranks differ", {"min_shape": (1,), "opt_shape": (1, 2), "max_shape": (1, 2)},
     ValueError, r"min/opt/max ranks differ"),
    ("float max", {"min_shape": (1,), "opt_shape": (2,), "max_shape": (4.0,)}, TypeError,
     r"max_shape must be a sequence of ints"),
    ("shape and range", {"shape": (1,), "min_shape": (1,), "opt_shape": (1,),
                         "max_shape": (1,)}, ValueError, r"either shape=... or min_shape"),
    ("dtype str", {"shape": (2,), "dtype": "float32"}, TypeError,
     r"dtype must be a torch.dtype \(torch.float32, torch.int64, ...\), got 'float32'"),
    ("low nan", {"shape": (2,), "low": float("nan")}, ValueError,
     r"low must be a finite number \(the range of example values\), got nan"),
    ("high inf", {"shape": (2,), "high": float("inf")}, ValueError,
     r"high must be a finite number"),
    ("low above high", {"shape": (2,), "low": 1.0, "high": 0.0}, ValueError,
     r"low=1.0 is above high=0.0"),
    ("name int", {"shape": (2,), "name": 0}, TypeError, r"name must be a str"),
    ("profile not a dict", {"profiles": [[1, 2, 3]]}, ValueError,
     r"profile 0 must be a dict with keys 'min', 'opt' and 'max'"),
    ("profile of numbers", {"profiles": [(1, 2, 3)]}, TypeError,
     r"min_shape must be a sequence of ints.*got 1"),
]


@pytest.mark.parametrize("kwargs, kind, match", [c[1:] for c in INPUT],
                         ids=[c[0] for c in INPUT])
def test_input(kwargs, kind, match):
    with pytest.raises(kind, match=match):
        Input(**kwargs)


def test_input_takes_a_torch_size_and_numpy_ints():
    np = pytest.importorskip("numpy")
    assert Input(shape=torch.Size([2, 3])).shape == (2, 3)
    assert Input(shape=(np.int64(2), 3)).shape == (2, 3)


# -- CompilationSettings / compile ------------------------------------------------------------
SETTINGS = [
    ("unknown name", {"min_blok_size": 1}, r"unknown settings 'min_blok_size' \(did you mean "
                                           r"'min_block_size'\?\)"),
    ("quantized precision", {"precision": "int8"}, r"'int8' is a quantization format"),
    ("precision typo", {"precision": "fp61"}, r"\(did you mean 'fp16'\?\)"),
    ("partitioner typo", {"partitioner": "dependency-aware"},
     r"\(did you mean 'dependency_aware'\?\)"),
    ("executor None", {"executor": None}, r"executor=None is not accepted; use one of "
                                          r"\['auto', 'reference', 'tensorrt'\]"),
    ("min_block_size str", {"min_block_size": "5"}, r"min_block_size must be a non-negative "
                                                    r"int, got '5'"),
    ("min_block_size float", {"min_block_size": 2.0}, r"must be a non-negative int, got 2.0"),
    ("workspace negative", {"workspace_size": -1}, r"workspace_size must be a non-negative"),
    ("optimization_level str", {"optimization_level": "3"},
     r"optimization_level must be an int in 0..5, got '3'"),
    ("optimization_level 9", {"optimization_level": 9}, r"must be an int in 0..5, got 9"),
    ("bool as str", {"cache_engines": "no"}, r"cache_engines must be True or False, got 'no'"),
    ("bool as int", {"require_full_compilation": 1},
     r"require_full_compilation must be True or False, got 1"),
    ("budget float", {"cpu_memory_budget": 1.5e9}, r"cpu_memory_budget must be a positive int"),
    ("budget zero", {"cpu_memory_budget": 0}, r"cpu_memory_budget must be a positive int"),
    ("cache dir int", {"engine_cache_dir": 5}, r"engine_cache_dir must be a directory path"),
    ("op typo", {"torch_executed_ops": ["aten::relu_typo"]}, r"unknown op 'aten::relu_typo'"),
    ("op int", {"torch_executed_ops": [3]}, r"torch_executed_ops: 3 is not an op"),
    ("ops int", {"torch_executed_ops": 3}, r"torch_executed_ops: got 3, not a collection"),
    ("module int", {"torch_executed_modules": [3]}, r"torch_executed_modules: 3 is not "
                                                    r"accepted"),
    ("backend typo", {"backend_priority": ("tensorrrt", "torch")},
     r"backend_priority: unknown backend 'tensorrrt' \(did you mean 'tensorrt'\?\)"),
    ("backend map list", {"backend_support_map": [("inductor", {"aten::sin"})]},
     r"backend_support_map must be a dict of backend name -> ops, got list"),
    ("backend map ops int", {"backend_support_map": {"inductor": 3}},
     r"backend_support_map\['inductor'\]: got 3, not a collection of ops"),
]


@pytest.mark.parametrize("kwargs, match", [c[1:] for c in SETTINGS],
                         ids=[c[0] for c in SETTINGS])
def test_settings(kwargs, match):
    with pytest.raises(ValueError, match=match):
        CompilationSettings.from_kwargs(**kwargs)
    with pytest.raises(ValueError, match=match):  # compile's keyword settings: the same
        ttr.compile(torch.nn.Linear(2, 2).eval(), (torch.randn(1, 2),), **kwargs)


def test_settings_documented_spellings():
    assert CompilationSettings(torch_executed_ops=None).torch_executed_ops == frozenset()
    assert CompilationSettings(backend_priority="tensorrt").backend_priority == ("tensorrt",)
    assert CompilationSettings(backend_priority=("inductor", "torch")).backend_priority == (
        "inductor", "torch")  # a registered torch.compile backend


def test_compile_settings_of_a_wrong_type():
    model, x = torch.nn.Linear(2, 2).eval(), torch.randn(1, 2)
    with pytest.raises(TypeError, match=r"settings: got a dict; pass settings=torch_trt_ref."
                       r"CompilationSettings\(...\), or the settings as keyword arguments"):
        ttr.compile(model, (x,), settings={"precision": "fp16"})
    with pytest.raises(ValueError, match=r"pass either settings=CompilationSettings\(...\) or "
                       r"keyword settings"):
        ttr.compile(model, (x,), settings=CompilationSettings(), precision="fp16")


def test_compile_of_non_finite_example_inputs_and_weights_matches_eager():
    """Documented eager-compatible result: NaN/inf in the example inputs or the weights are
    compiled as any values; the module returns what eager returns, NaN for NaN."""
    model = torch.nn.Linear(4, 3).eval()
    with torch.no_grad():
        model.bias[1] = float("nan")
    x = torch.tensor([[1.0, float("inf"), 0.0, 2.0], [0.5, 1.0, float("nan"), -1.0]])
    compiled = ttr.compile(model, (x,), min_block_size=1)
    assert compiled.compile_report.counts == {"tensorrt": 1}
    torch.testing.assert_close(compiled(x), model(x), equal_nan=True)


# -- the CLI's zoo and perf commands ----------------------------------------------------------
CLI = [
    (["zoo", "run", "--models", "resnet_18"], r"argument --models: invalid choice: "
                                              r"'resnet_18'"),
    (["zoo", "run", "--precisions", "int4"], r"argument --precisions: invalid choice: 'int4'"),
    (["zoo", "run", "--strategies", "greedy"], r"argument --strategies: invalid choice"),
    (["zoo", "run", "--quick", "--full"], r"argument --full: not allowed with argument "
                                          r"--quick"),
    (["zoo", "run", "--timeout", "-1"], r"argument --timeout: -1 is not a number > 0"),
    (["zoo", "run", "--timeout", "ten"], r"argument --timeout: 'ten' is not a number > 0"),
    (["zoo", "run", "--runs", "0"], r"argument --runs: 0 is not an integer > 0"),
    (["zoo", "run", "--runs", "2.5"], r"argument --runs: '2.5' is not an integer > 0"),
    (["zoo", "run", "--warmup", "-1"], r"argument --warmup: -1 is not an integer >= 0"),
    (["zoo", "run", "--max-seconds", "0"], r"argument --max-seconds: 0 is not a number > 0"),
    (["zoo", "run", "--budget-fraction", "1.5"], r"argument --budget-fraction: 1.5 is not a "
                                                 r"number > 0 and <= 1"),
    (["zoo", "run", "--ray-cpus", "0"], r"argument --ray-cpus: 0 is not an integer > 0"),
    (["zoo", "run", "--rp", "yes"], r"argument --rp: invalid choice: 'yes'"),
    (["zoo", "run", "--isolation", "thread"], r"argument --isolation: invalid choice"),
    (["zoo", "compare", "a.jsonl"], r"the following arguments are required: new"),
    (["zoo", "compare", "a", "b", "--time-threshold", "-1"],
     r"argument --time-threshold: -1 is not a number > 0"),
    (["zoo", "compare", "a", "b", "--min-mib", "nan"], r"argument --min-mib: nan is not a "
                                                       r"number >= 0"),
    (["zoo", "report"], r"the following arguments are required: records"),
    (["zoo", "anchors", "--precision", "fp16"], r"argument --precision: invalid choice"),
    (["zoo", "save", "out", "--batches", "0"], r"argument --batches: 0 is not an integer > 0"),
    (["zoo", "latency", "p.prog", "--runs", "-5"], r"argument --runs: -5 is not an integer"),
    (["zoo", "nosuch"], r"argument ZOO_COMMAND: invalid choice: 'nosuch'"),
    (["compile", "resnet18", "--cpu-memory-budget", "0"],  # 0 was taken as "not given"
     r"argument --cpu-memory-budget: 0 is not an integer > 0"),
    (["compile", "resnet18", "--min-block-size", "-1"],
     r"argument --min-block-size: -1 is not an integer >= 0"),
    (["debug", "resnet18", "--precision", "int8"], r"argument --precision: invalid choice"),
    (["zoo", "list", "--bogus"], r"unrecognized arguments: --bogus"),
    (["perf", "nosuch"], r"invalid choice: 'nosuch'"),
    (["perf", "run", "--suite", "nosuch"], r"argument --suite: invalid choice: 'nosuch'"),
    (["perf", "run", "--processes", "two"], r"argument --processes: 'two' is not an integer > 0"),
    (["perf", "run", "--processes", "0"], r"argument --processes: 0 is not an integer > 0"),
    (["perf", "run", "--max-wait", "soon"], r"argument --max-wait: 'soon' is not a number >= 0"),
    (["perf", "run", "--max-wait", "-5"], r"argument --max-wait: -5 is not a number >= 0"),
    (["perf", "run", "--load-limit", "-1"], r"argument --load-limit: -1 is not a number > 0"),
    (["perf", "gate", "--max-suspects", "x"], r"argument --max-suspects: 'x' is not an integer"),
    (["perf", "gate", "--max-suspects", "-1"], r"argument --max-suspects: -1 is not an integer "
                                               r">= 0"),
    (["perf", "gate", "--ab-each", "0"], r"argument --ab-each: 0 is not an integer > 0"),
    (["perf", "calibrate", "--runs", "x"], r"argument --runs: 'x' is not an integer >= 5"),
    (["perf", "calibrate", "--runs", "0"], r"argument --runs: 0 is not an integer >= 5"),
]


@pytest.mark.parametrize("argv, match", CLI, ids=[" ".join(c[0]) for c in CLI])
def test_cli_argument_errors(capsys, argv, match):
    """argparse's errors: exit code 2, the usage and one line naming the argument."""
    with pytest.raises(SystemExit) as info:
        cli_main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert re.search(match, err.strip().splitlines()[-1]), err


CHECKED = [  # errors of our own checks, before any model is built or run
    (["zoo", "run", "--tags", "nosuchtag", "--no-report"],
     r"^error: --tags nosuchtag: no zoo model has any of these tags; tags: .*vision"),
    (["zoo", "anchors", "--models", "resnet_18"],
     r"^error: --models: resnet_18 not among the anchor models: .*resnet18"),
    (["zoo", "anchors", "--markdown", "{tmp}/no/t.md"],
     r"^error: --markdown {tmp}/no/t.md: no directory {tmp}/no; create it"),
    (["zoo", "report", "{tmp}/none.jsonl"], r"^error: {tmp}/none.jsonl: no such file"),
    (["zoo", "report", "{tmp}/none.jsonl", "--html", "{tmp}/no/r.html"],
     r"^error: --html {tmp}/no/r.html: no directory {tmp}/no"),
    (["zoo", "compare", "{tmp}/a.jsonl", "{tmp}/b.jsonl"], r"^error: {tmp}/a.jsonl: no such "
                                                           r"file"),
    (["perf", "gate", "--ab-each", "3"], r"^error: --ab-each must be a positive even number"),
]


@pytest.mark.parametrize("argv, match", CHECKED, ids=[" ".join(c[0]) for c in CHECKED])
def test_cli_checked_errors(capsys, tmp_path, argv, match):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    assert cli_main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert re.search(match.replace("{tmp}", re.escape(str(tmp_path))),
                     err.strip().splitlines()[-1]), err
