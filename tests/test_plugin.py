"""``conversion.plugin("ns::op")`` (docs/converters.md "Custom ops and plugins"). TensorRT
for RTX 1.7.1 adds a plugin layer only through its ONNX parser, which aborts a process that
cannot open ``libtensorrt_rtx.so`` (Note [Plugin layers in TensorRT for RTX]); the evidence
is held here. The import shim opens the wheel's libraries through a folder of links that
holds that name (Note [TensorRT for RTX through a folder of links], ``_trt.py``), so in a
plain process that imports torch_trt_ref (tests/plugin_script.py, no LD_LIBRARY_PATH) the
op becomes a plugin layer in the engine, judged by the float64 rule with the op's own kernel
as its reference, and a saved program loads in a process that never imported the op. Where
the library cannot be opened (tensorrt_rtx imported first) ``plugin`` raises
``PluginUnavailable`` and the op runs in a PyTorch segment, judged by the same rule."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import torch_trt_ref
from torch_trt_ref._trt import IS_RTX, trt
from torch_trt_ref.accuracy import judge
from torch_trt_ref.conversion import plugin
from torch_trt_ref.conversion.plugin import custom_op_overload, library_on_search_path

rtx_only = pytest.mark.skipif(not IS_RTX, reason="the evidence is about tensorrt_rtx 1.7.1")
_PROBE = Path(__file__).with_name("plugin_probe.py")
_SCRIPT = Path(__file__).with_name("plugin_script.py")


def _plain_env() -> dict:
    """This environment without LD_LIBRARY_PATH, with this checkout on PYTHONPATH."""
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(torch_trt_ref.__file__).parent.parent),
                                         env.get("PYTHONPATH", "")])
    return env


# a process that imports tensorrt_rtx by itself (no shim) can open the unversioned library
_SYSTEM_OPENS_IT = library_on_search_path(links=False) is not None

_UNAVAILABLE = """
import tensorrt_rtx  # first: its libraries open from the wheel's folder, without the shim's links
import torch_trt_ref, plugin_example_ops
from torch_trt_ref.conversion import PluginUnavailable, plugin
try:
    plugin("ttr_plugin_example::topk_gather")
except PluginUnavailable as err:
    print(type(err).__mro__[1].__name__, "|", err)
"""


@torch.library.custom_op("ttr_plugin_test::topk_gather", mutates_args=())
def topk_gather(x: torch.Tensor, k: int) -> torch.Tensor:
    """The k entries of largest magnitude per row, in order: a data-dependent gather."""
    return torch.gather(x, -1, x.abs().topk(k, dim=-1).indices)


@topk_gather.register_fake
def _(x, k):
    return x.new_empty(*x.shape[:-1], k)


@torch.library.custom_op("ttr_plugin_test::no_fake", mutates_args=())
def no_fake(x: torch.Tensor) -> torch.Tensor:
    return x + 1


@torch.library.custom_op("ttr_plugin_test::add_into", mutates_args=("out",))
def add_into(x: torch.Tensor, out: torch.Tensor) -> None:
    out.add_(x)


class _Model(torch.nn.Module):
    def forward(self, x):
        return torch.relu(topk_gather(torch.sin(x), 3)) * 2.0


@rtx_only
@pytest.mark.skipif(_SYSTEM_OPENS_IT,
                    reason="libtensorrt_rtx.so opens on this machine without the shim")
def test_without_the_library_the_error_names_the_op_the_missing_api_and_the_remedy():
    run = subprocess.run([sys.executable, "-c", _UNAVAILABLE], capture_output=True, text=True,
                         timeout=300, cwd=Path(__file__).parent, env=_plain_env())
    assert run.returncode == 0, run.stderr[-2000:]
    base, message = run.stdout.split(" | ", 1)
    assert base == "NotImplementedError"
    assert "ttr_plugin_example.topk_gather.default" in message and "PyTorch segment" in message
    assert "add_plugin_v3" in message and trt.__version__ in message
    assert "libtensorrt_rtx.so" in message and "LD_LIBRARY_PATH" in message
    assert "tensorrt_rtx was imported before torch_trt_ref" in message


@rtx_only
def test_in_this_process_the_shim_s_links_let_plugin_register():
    from torch_trt_ref._trt import RTX_LINKS
    from torch_trt_ref.conversion.registry import ConverterRegistry

    assert isinstance(RTX_LINKS, Path), RTX_LINKS
    assert library_on_search_path() == str(RTX_LINKS / "libtensorrt_rtx.so")
    assert (RTX_LINKS / "libtensorrt_rtx.so").resolve() == \
        (Path(trt.__file__).parent.parent / "tensorrt_rtx_libs" / "libtensorrt_rtx.so.1").resolve()
    registry = ConverterRegistry()
    support = plugin("ttr_plugin_test::topk_gather", registry)
    assert support.family == "plugin" and list(registry.candidates(support.target)) == [support]


@pytest.mark.parametrize("name, match", [
    (3, "namespace::op"),
    ("topk_gather", "namespace::op"),
    ("ttr_plugin_test::missing", "no op 'ttr_plugin_test::missing' is registered"),
    ("nons_ttr::op", "is registered"),
    ("aten::add", "is an ATen op"),
    ("ttr_plugin_test::topk_gather.nope", "has no overload 'nope'"),
    ("ttr_plugin_test::no_fake", "has no fake kernel"),
    ("ttr_plugin_test::add_into", "mutates its arguments"),
])
def test_bad_names_are_refused_before_anything_else(name, match):
    with pytest.raises(ValueError, match=match):
        plugin(name)


def test_the_overload_is_the_op_itself():
    overload = custom_op_overload("ttr_plugin_test::topk_gather")
    assert overload is torch.ops.ttr_plugin_test.topk_gather.default
    x = torch.randn(2, 5)
    assert torch.equal(overload(x, 2), topk_gather(x, 2))


@rtx_only
def test_the_network_has_no_method_that_adds_a_plugin_layer():
    names = [n for n in dir(trt.INetworkDefinition) if "plugin" in n.lower()]
    assert names == []
    assert {"PLUGIN_V3", "PLUGIN_V2"} <= set(trt.LayerType.__members__)  # the kinds exist


@rtx_only
def test_the_python_plugin_api_is_not_shipped():
    with pytest.raises(ImportError, match="tensorrt_rtx_bindings.plugin"):
        __import__("tensorrt_rtx.plugin")


@rtx_only
def test_the_onnx_parser_refuses_a_v2_plugin_creator():
    from onnx import TensorProto, helper

    class Creator(trt.IPluginCreator):
        def __init__(self):
            trt.IPluginCreator.__init__(self)
            self.name, self.plugin_namespace, self.plugin_version = "V2Op", "ttr_v2", "1"
            self.field_names = trt.PluginFieldCollection([])

        def create_plugin(self, name, fields):
            raise AssertionError("never asked: V2 creators are refused first")

    creator = Creator()
    assert trt.get_plugin_registry().register_creator(creator, "ttr_v2")
    logger = trt.Logger(trt.Logger.INTERNAL_ERROR)
    net = trt.Builder(logger).create_network(
        1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED))
    value = helper.make_tensor_value_info
    graph = helper.make_graph([helper.make_node("V2Op", ["x"], ["y"], domain="ttr_v2")], "g",
                              [value("x", TensorProto.FLOAT, [2])],
                              [value("y", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("ttr_v2", 1)])
    parser = trt.OnnxParser(net, logger)
    assert not parser.parse(model.SerializeToString())
    assert "IPluginCreatorV3One creator only" in str(parser.get_error(0))
    trt.get_plugin_registry().deregister_creator(creator)


def _link_folder(folder: Path) -> dict:
    """An environment whose LD_LIBRARY_PATH holds a link libtensorrt_rtx.so -> the wheel's
    libtensorrt_rtx.so.1 (read when the process starts)."""
    libs = Path(trt.__file__).parent.parent / "tensorrt_rtx_libs"
    (folder / "libtensorrt_rtx.so").symlink_to(libs / "libtensorrt_rtx.so.1")
    return dict(os.environ, LD_LIBRARY_PATH=str(folder))


def _no_core_dump():
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # the abort below must leave no file


def _probe(env, folder):
    return subprocess.run([sys.executable, str(_PROBE)], capture_output=True, text=True,
                          env=env, timeout=300, cwd=folder, preexec_fn=_no_core_dump)


@rtx_only
@pytest.mark.skipif(_SYSTEM_OPENS_IT,
                    reason="libtensorrt_rtx.so opens on this machine without the shim")
def test_the_parser_door_aborts_the_process_without_the_unversioned_library(tmp_path):
    run = _probe(os.environ, tmp_path)
    assert run.returncode == -6, (run.returncode, run.stdout, run.stderr)  # SIGABRT
    assert "terminate called" in run.stderr and "parsed" not in run.stdout


@rtx_only
def test_the_parser_door_opens_with_the_library_on_the_search_path(tmp_path):
    run = _probe(_link_folder(tmp_path), tmp_path)
    assert run.returncode == 0, run.stderr
    lines = dict(line.split(" ", 1) for line in run.stdout.splitlines())
    assert lines["parsed"] == "True" and lines["layers"] == "['PLUGIN_V3']"
    assert int(lines["plan_bytes"]) > 0  # the CPU-only builder built around the plugin


@rtx_only
def test_the_parser_door_opens_through_the_shim_s_links_without_the_search_path(tmp_path):
    run = subprocess.run([sys.executable, str(_PROBE), "shim"], capture_output=True, text=True,
                         env=_plain_env(), timeout=300, cwd=tmp_path, preexec_fn=_no_core_dump)
    assert run.returncode == 0, (run.returncode, run.stderr[-2000:])
    lines = dict(line.split(" ", 1) for line in run.stdout.splitlines())
    assert lines["parsed"] == "True" and lines["layers"] == "['PLUGIN_V3']"


# -- the plugin path, in a fresh process that can open the library ------------------------

@pytest.fixture(scope="module")
def plugin_run(tmp_path_factory):
    """tests/plugin_script.py: ``compile`` in a plain process (no LD_LIBRARY_PATH: the
    shim's folder of links), then ``load`` in a process that never imported the ops (the
    saved program names their module)."""
    if not IS_RTX:
        pytest.skip("the plugin path is built on tensorrt_rtx's ONNX parser")
    folder = tmp_path_factory.mktemp("plugin")
    for mode in ("compile", "load"):
        run = subprocess.run([sys.executable, str(_SCRIPT), mode, str(folder)],
                             capture_output=True, text=True, env=_plain_env(), timeout=600)
        assert run.returncode == 0, run.stderr[-3000:]
    return (json.loads((folder / "compile.json").read_text()),
            json.loads((folder / "load.json").read_text()))


def test_with_the_library_plugin_registers_once(plugin_run):
    facts, _ = plugin_run
    library = Path(facts["library"])  # in the shim's folder of links
    assert library.name == "libtensorrt_rtx.so" and library.parent.parent.name == "trt_rtx_links"
    assert facts["same_support_twice"]


def test_the_op_is_a_plugin_layer_in_the_one_engine(plugin_run):
    static = plugin_run[0]["static"]
    assert static["counts"] == {"tensorrt": 1}  # no PyTorch segment
    assert static["kinds"].count("PLUGIN_V3") == 1
    (converters,) = static["converters"]
    assert converters["ttr_plugin_example.topk_gather.default"] == 1


def test_the_plugin_engine_passes_the_float64_rule(plugin_run):
    assert plugin_run[0]["static"]["passed"]


def test_the_layer_names_the_op_and_its_module_and_takes_the_fake_kernel_s_shape(plugin_run):
    layer = plugin_run[0]["static"]["layer"]
    assert layer == {"op": "ttr_plugin_example::topk_gather.default",
                     "module": "plugin_example_ops", "shape": [4, 3]}


def test_dynamic_batch_through_the_fake_kernel(plugin_run):
    dynamic = plugin_run[0]["dynamic"]
    assert dynamic["counts"] == {"tensorrt": 1}
    assert dynamic["shape"] == [-1, 3]  # TensorRT's runtime dim, k from the fake kernel
    assert dynamic["passed"] == [True, True, True]  # batch 1, 5, 8


def test_two_plugins_with_several_inputs_and_outputs_share_an_engine(plugin_run):
    two = plugin_run[0]["two"]
    assert two["counts"] == {"tensorrt": 1} and two["plugins"] == 2
    assert two["outputs"] == [2, 1] and two["passed"]


def test_an_engine_with_a_plugin_comes_back_from_the_engine_cache(plugin_run):
    cache = plugin_run[0]["cache"]
    assert cache["hits"] == [[False], [True]]
    assert cache["equal"] and "PLUGIN_V3" in cache["kinds"]


def test_fp16_plugin_layers_run_the_op_in_fp16_and_pass_the_rule(plugin_run):
    fp16 = plugin_run[0]["fp16"]
    assert fp16["dtypes"] == ["torch.float16"]
    assert fp16["passed"], fp16["message"]


def test_an_output_dim_the_plugin_cannot_state_keeps_the_op_in_pytorch(plugin_run):
    doubled = plugin_run[0]["doubled"]
    (reason,) = doubled["rejected"].values()
    assert "neither a constant nor a dim of an input" in reason and "2*s" in reason
    assert doubled["passed"]


def test_a_saved_program_loads_in_a_fresh_process_that_imports_the_op_s_module(plugin_run):
    _, loaded = plugin_run
    assert loaded == {"registered_before": False, "equal": True, "imported": True}


# -- without the library: the op in a PyTorch segment --------------------------------------

@pytest.fixture(scope="module")
def compiled():
    model, x = _Model(), torch.randn(4, 8, generator=torch.Generator().manual_seed(0))
    return model, x, torch_trt_ref.compile(model.eval(), [x], min_block_size=1)


def test_the_op_runs_in_a_pytorch_segment_with_its_reason(compiled):
    *_, module = compiled
    partition = module.compile_report.partition
    assert partition["rejected"] == {
        "topk_gather": "no converter for ttr_plugin_test.topk_gather.default"}
    torch_nodes = [s["nodes"] for s in partition["segments"] if s["target"] == "torch"]
    assert torch_nodes == [["topk_gather"]]
    assert partition["counts"]["tensorrt"] == 2


def test_the_op_in_pytorch_passes_the_float64_rule(compiled):
    model, x, module = compiled
    with torch.no_grad():
        verdict = judge(module(x), model(x), model(x.double()))
    assert verdict.passed, verdict.message


def test_it_saves_and_loads_with_the_op_in_pytorch(compiled, tmp_path):
    _, x, module = compiled
    loaded = torch_trt_ref.load(torch_trt_ref.save(module, tmp_path / "m.trtref"))
    assert torch.equal(loaded(x), module(x))


def test_a_layer_whose_op_module_is_gone_says_which():
    from torch_trt_ref.runtime.reference.layers.plugin_ops import resolve_op

    with pytest.raises(RuntimeError, match="module 'ttr_no_such_module', which cannot be "):
        resolve_op("ttr_gone::op.default", "ttr_no_such_module")
    assert resolve_op("ttr_plugin_test::topk_gather.default", "") is \
        torch.ops.ttr_plugin_test.topk_gather.default
