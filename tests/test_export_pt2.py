"""``torch.export`` of a compiled module keeps each engine as one
``torch_trt_ref::execute_engine`` call whose fake implementation gives symbolic output
shapes, and ``torch.export.save`` / ``torch.export.load`` (.pt2) round-trip the program
with its dynamic shapes: loaded in a fresh process that had not imported torch_trt_ref,
it equals the compiled module bit for bit and passes the float64 rule against eager at
the min, opt and max of its ranges."""

from __future__ import annotations

import operator

import deploy_programs
import pytest
import torch
from deploy_programs import BUILDERS, exported, program, same

import torch_trt_ref
from torch_trt_ref import Input
from torch_trt_ref.runtime.module import EngineModule

EXECUTE_ENGINE = torch.ops.torch_trt_ref.execute_engine.default
# what each program computes outside its engines (its PyTorch segments)
PYTORCH_OPS = {"resnet18": set(), "bert": set(),
               "conv_sigmoid_conv": {torch.ops.aten.sigmoid.default}}


def engine_count(module: torch.nn.Module) -> int:
    return sum(isinstance(m, EngineModule) for m in module.modules())


@pytest.mark.parametrize("name", list(BUILDERS))
def test_export_keeps_engines_as_engines(name):
    program_ = exported(name)
    calls = [n for n in program_.graph.nodes if n.op == "call_function"]
    engines = [n for n in calls if n.target is EXECUTE_ENGINE]
    assert len(engines) == engine_count(program(name).compiled)
    others = {n.target for n in calls} - {EXECUTE_ENGINE, operator.getitem}
    assert others == PYTORCH_OPS[name]
    lifted = [s for s in program_.graph_signature.input_specs if s.kind.name == "CUSTOM_OBJ"]
    assert len(lifted) == len(engines)


def test_engine_outputs_keep_symbolic_shapes():
    """BERT's sequence length stays one symbol through the engine (fake implementation)."""
    program_ = exported("bert")
    (symbol,) = program_.range_constraints
    ranges = program_.range_constraints[symbol]
    assert (int(ranges.lower), int(ranges.upper)) == (1, 32)
    output = next(n for n in program_.graph.nodes if n.op == "output")
    hidden = output.args[0][0].meta["val"]
    assert hidden.shape[0] == 1 and hidden.shape[2] == 64
    assert hidden.shape[1].node.expr == symbol


@pytest.mark.parametrize("name", list(BUILDERS))
def test_exported_program_equals_the_compiled_module(name):
    p = program(name)
    module = exported(name).module()
    with torch.no_grad():
        for args, want in zip(p.inputs, p.compiled_outputs):
            assert same(module(*args), want)


@pytest.mark.parametrize("name", list(BUILDERS))
def test_pt2_loaded_in_a_fresh_process_equals_the_compiled_module(name):
    results, _ = deploy_programs.fresh()
    p, loaded = program(name), results[name, "torch.export.save"]
    assert loaded["engines"] == engine_count(p.compiled)
    deploy_programs.check_loaded_outputs(name, p, loaded["outputs"], ".pt2")
    if p.dynamic_shapes is not None:
        low, high = p.inputs[0][0].shape, p.inputs[-1][0].shape
        dim = next(d for d in range(len(low)) if low[d] != high[d])
        assert f"VR[{low[dim]}, {high[dim]}]" in loaded["ranges"]


class Flatten(torch.nn.Module):
    def forward(self, x):
        return (torch.relu(x) * 2).reshape(-1)


def test_an_output_dim_that_is_an_expression_of_input_dims():
    compiled = torch_trt_ref.compile(
        Flatten(), [Input(min_shape=(1, 16), opt_shape=(2, 16), max_shape=(6, 16))],
        min_block_size=1)
    (engine,) = [m for m in compiled.modules() if isinstance(m, EngineModule)]
    assert [rule.dims for rule in engine.handle.rules] == [("(16 * in0_0)",)]
    batch = torch.export.Dim("batch", min=1, max=6)
    program_ = torch.export.export(compiled, (torch.randn(3, 16),), dynamic_shapes=({0: batch},))
    (symbol,) = program_.range_constraints
    output = next(n for n in program_.graph.nodes if n.op == "output")
    assert output.args[0][0].meta["val"].shape[0].node.expr == 16 * symbol
    x = torch.randn(5, 16)
    assert torch.equal(program_.module()(x), Flatten()(x))


def test_a_loaded_program_exports(tmp_path):
    p = program("conv_sigmoid_conv")
    torch_trt_ref.save(p.compiled, tmp_path / "program.ttrt")
    loaded = torch_trt_ref.load(tmp_path / "program.ttrt")
    program_ = torch.export.export(loaded, p.inputs[1], dynamic_shapes=p.dynamic_shapes)
    with torch.no_grad():
        for args, want in zip(p.inputs, p.compiled_outputs):
            assert same(program_.module()(*args), want)
