"""The dry run: ``compile(..., dryrun=True)`` and ``torch-trt-ref compile --dryrun`` plan
without converting or building, and plan what the real compile does."""

import pytest
import torch

import torch_trt_ref as ttr
from torch_trt_ref import cli
from torch_trt_ref.capture import capture
from torch_trt_ref.compiler import lower_program
from torch_trt_ref.runtime.module import EngineModule
from zoo.registry import get


@pytest.mark.parametrize("name", ["lgamma_graph", "unconvertible", "bert_2layer"])
def test_dry_run_plans_the_segments_the_compile_makes(name):
    entry = get(name)
    model = entry.factory()
    args, kwargs = entry.inputs()
    planned = ttr.compile(model, args, kwargs, dryrun=True).compile_report
    built = ttr.compile(model, args, kwargs).compile_report
    assert planned.dryrun and planned.engines == [] and not built.dryrun
    assert planned.counts == built.counts
    assert planned.plan["estimated_engines"] == len(built.engines)
    assert planned.support == built.support


class Blocks(torch.nn.Module):
    """relu, then an add forced to PyTorch, then two linear layers: with min_block_size=3
    the lone relu goes back to PyTorch; the linears make the one engine."""

    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(8, 8), torch.nn.Linear(8, 8)

    def forward(self, x):
        y = torch.relu(x) + 1.0
        return torch.tanh(self.b(torch.relu(self.a(y))))


def test_dry_run_report_and_module():
    model, x = Blocks().eval(), torch.randn(2, 8)
    compiled = ttr.compile(model, (x,), dryrun=True, min_block_size=3,
                           torch_executed_ops={"aten.add.Tensor"})
    assert not any(isinstance(m, EngineModule) for m in compiled.modules())
    torch.testing.assert_close(compiled(x), model(x))  # every segment runs in PyTorch
    report = compiled.compile_report
    plan = report.plan
    assert report.counts == {"torch": 1, "tensorrt": 1}
    (moved,) = plan["moved_by_min_block_size"]
    assert moved["segment"] == "_run_on_torch_0" and moved["nodes"] == ["relu"]
    assert moved["reason"] == "its tensorrt segment has 1 compute node(s) < min_block_size=3"
    assert plan["estimated_engines"] == 1
    engine = plan["segments"][1]
    assert engine["target"] == "tensorrt"
    assert engine["weight_bytes"] == 2 * (8 * 8 + 8) * 4  # two fp32 Linear(8, 8)
    text = report.render()
    assert "dry run: lowered and partitioned only; nothing was converted or built" in text
    assert "unsupported aten.add.Tensor x1: forced to PyTorch by torch_executed_ops" in text
    assert ("min_block_size=3 sent 1 planned run(s) of supported nodes (1 nodes) back to "
            "PyTorch") in text
    assert "estimated engines: 1, 0.00 MiB of weights in them" in text


class ConvHead(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.fc = torch.nn.Conv2d(3, 4, 3), torch.nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(torch.relu(self.conv(x)).mean((2, 3)))


def test_converter_support_lowers_an_unlowered_graph_first(capsys):
    model, x = ConvHead().eval(), torch.randn(1, 3, 8, 8)
    ep = capture(model, (x,))
    expected = ttr.get_graph_converter_support(lower_program(ep, ttr.CompilationSettings()),
                                               verbose=False)
    assert expected[0] == expected[1]  # everything converts once lowered
    capsys.readouterr()
    assert ttr.get_graph_converter_support(ep.module()) == expected
    printed = capsys.readouterr().out
    assert "the graph was not lowered (aten.conv2d.default, aten.linear.default" in printed
    assert "exported again and lowered first, as compile does" in printed
    assert "no converter" not in printed
    assert ttr.get_graph_converter_support(ep, verbose=False) == expected


def test_cli_dry_run_of_a_users_file(tmp_path, capsys):
    source = tmp_path / "mymodel.py"
    source.write_text(
        "import torch\n\n"
        "def make():\n"
        "    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(),\n"
        "                                torch.nn.Linear(8, 8), torch.nn.Tanh()).eval()\n"
        "    return model, (torch.randn(2, 8),)\n")
    out_json = tmp_path / "plan.json"
    code = cli.main(["compile", f"{source}:make", "--dryrun", "--min-block-size", "1",
                     "--json", str(out_json)])
    assert code == 0
    out = capsys.readouterr().out
    assert f"model: {source}:make" in out and "dry run:" in out
    assert "segments: 1 TensorRT, 0 PyTorch" in out and "estimated engines: 1" in out
    import json

    data = json.loads(out_json.read_text())
    assert data["dryrun"] and data["counts"] == {"tensorrt": 1} and data["engines"] == []
