"""Tied dynamic dims (``Input(shared_dims={0: "batch"})``, the peer's 2.14 spelling): axes of
different inputs that share a name are one ``torch.export.Dim``, one symbol in the captured
program, and the compiled module refuses unequal sizes; declared ranges that disagree for
one name are a clear error. Oracle: eager PyTorch in float64 at min, opt and max."""

from __future__ import annotations

import copy

import pytest
import torch

import torch_trt_ref
from torch_trt_ref import Input
from torch_trt_ref.accuracy import judge
from torch_trt_ref.capture import capture
from torch_trt_ref.runtime.module import EngineModule


class TwoHeads(torch.nn.Module):
    """Two inputs the graph never relates: export alone keeps their batches apart."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.a, self.b = torch.nn.Linear(4, 3), torch.nn.Linear(5, 3)

    def forward(self, x, y):
        return torch.relu(self.a(x)), torch.tanh(self.b(y))


def _spec(features, shared=True, lo=1, opt=3, hi=8, **kw):
    return Input(min_shape=(lo, features), opt_shape=(opt, features), max_shape=(hi, features),
                 shared_dims={0: "batch"} if shared else (), **kw)


def _symbols(ep):
    return [str(n.meta["val"].shape[0]) for n in ep.graph.nodes if n.op == "placeholder"
            and n.meta["val"].dim() == 2 and n.name in ("x", "y")]


def test_shared_name_is_one_symbol_and_apart_without_it():
    model = TwoHeads().eval()
    tied = capture(model, [_spec(4), _spec(5)])
    apart = capture(model, [_spec(4, False), _spec(5, False)])
    assert len(set(_symbols(tied))) == 1
    assert len(set(_symbols(apart))) == 2


@pytest.fixture(scope="module")
def compiled():
    model = TwoHeads().eval()
    return model, torch_trt_ref.compile(model, [_spec(4), _spec(5)], min_block_size=1)


@pytest.mark.parametrize("batch", [1, 3, 8])
def test_passes_the_float64_rule_across_the_range(compiled, batch):
    model, module = compiled
    x, y = torch.randn(batch, 4), torch.randn(batch, 5)
    with torch.no_grad():
        verdict = judge(module(x, y), model(x, y),
                        copy.deepcopy(model).double()(x.double(), y.double()))
    assert verdict.passed, verdict.message


def test_the_engine_profile_holds_the_declared_range_for_both(compiled):
    _, module = compiled
    (engine,) = [m.engine for m in module.modules() if isinstance(m, EngineModule)]
    ranges = {(s.min_shape[0], s.opt_shape[0], s.max_shape[0]) for s in engine.inputs
              if len(s.min_shape) == 2}
    assert ranges == {(1, 3, 8)}


def test_unequal_sizes_at_a_call_are_refused(compiled):
    _, module = compiled
    with pytest.raises(ValueError, match=r"shared dim 'batch': input 'x' dim 0 is 2, input "
                                         r"'y' dim 0 is 3"):
        module(torch.randn(2, 4), torch.randn(3, 5))


def test_a_keyword_input_shares_with_a_positional_one():
    model = TwoHeads().eval()
    module = torch_trt_ref.compile(model, [_spec(4)], {"y": _spec(5)}, min_block_size=1)
    x, y = torch.randn(6, 4), torch.randn(6, 5)
    with torch.no_grad():
        verdict = judge(module(x, y=y), model(x, y=y),
                        copy.deepcopy(model).double()(x.double(), y=y.double()))
    assert verdict.passed, verdict.message
    with pytest.raises(ValueError, match="input 'y' dim 0 is 2"):
        module(x, y=torch.randn(2, 5))


@pytest.mark.parametrize("other, shown", [
    (dict(hi=16), r"\(1, 3, 16\)"),
    (dict(opt=4), r"\(1, 4, 8\)"),
    (dict(lo=2), r"\(2, 3, 8\)"),
])
def test_mismatched_declared_ranges_for_one_name_are_an_error(other, shown):
    with pytest.raises(ValueError, match=r"shared dim 'batch': input 'y' dim 0 declares "
                                         rf"min/opt/max {shown}, input 'x' dim 0 declares "
                                         r"\(1, 3, 8\)"):
        torch_trt_ref.compile(TwoHeads().eval(), [_spec(4), _spec(5, **other)])


@pytest.mark.parametrize("shared, match", [
    ({1: "batch"}, "dim 1 .*static"),
    ({0: "not a name"}, "must be a Python identifier"),
    ({2: "batch"}, "not a dim of a rank-2 input"),
    (["batch"], "shared_dims is a dict"),
])
def test_bad_shared_dims_are_named(shared, match):
    with pytest.raises(ValueError, match=match):
        Input(min_shape=(1, 4), opt_shape=(2, 4), max_shape=(8, 4), shared_dims=shared)


def test_a_negative_dim_is_normalized_and_specs_stay_hashable():
    spec = Input(min_shape=(2, 1), opt_shape=(2, 3), max_shape=(2, 8), shared_dims={-1: "n"})
    assert spec.shared_dims == ((1, "n"),)
    assert hash(spec) == hash(Input(min_shape=(2, 1), opt_shape=(2, 3), max_shape=(2, 8),
                                    shared_dims={1: "n"}))


def test_two_names_tie_two_axes_each():
    class Outer(torch.nn.Module):
        def forward(self, x, y):
            return x.sum(1, keepdim=True) * 2, y.sum(1, keepdim=True) + 1

    spec = lambda: Input(min_shape=(1, 2, 3), opt_shape=(2, 4, 3),  # noqa: E731
                         max_shape=(4, 8, 3), shared_dims={0: "b", 1: "t"})
    model = Outer().eval()
    ep = capture(model, [spec(), spec()])
    shapes = [n.meta["val"].shape for n in ep.graph.nodes if n.op == "placeholder"]
    assert str(shapes[0][:2]) == str(shapes[1][:2])
    module = torch_trt_ref.compile(model, [spec(), spec()], min_block_size=1)
    x, y = torch.randn(3, 5, 3), torch.randn(3, 5, 3)
    with torch.no_grad():
        verdict = judge(module(x, y), model(x, y), model(x.double(), y.double()))
    assert verdict.passed, verdict.message


def test_dynamic_shapes_use_one_dim_object_per_name():
    from torch_trt_ref.capture import dynamic_shapes_for

    shapes = dynamic_shapes_for({"x": _spec(4), "y": _spec(5), "z": _spec(6, False)})
    assert shapes["x"][0] is shapes["y"][0]
    assert shapes["x"][0].__name__ == "batch"
    assert getattr(shapes["z"][0], "__name__", None) != "batch"  # Dim.DYNAMIC: unnamed


def test_three_inputs_share_one_name():
    class Three(torch.nn.Module):
        def forward(self, a, b, c):
            return a.sum(1), b.sum(1), c.sum(1)

    model = Three().eval()
    ep = capture(model, [_spec(2), _spec(3), _spec(4)])
    symbols = {str(n.meta["val"].shape[0]) for n in ep.graph.nodes if n.op == "placeholder"}
    assert len(symbols) == 1
    module = torch_trt_ref.compile(model, [_spec(2), _spec(3), _spec(4)], min_block_size=1)
    with pytest.raises(ValueError, match="input 'c' dim 0 is 5"):
        module(torch.randn(4, 2), torch.randn(4, 3), torch.randn(5, 4))


def test_inputs_passed_by_keyword_are_checked_too(compiled):
    _, module = compiled
    with pytest.raises(ValueError, match="shared dim 'batch'"):
        module(x=torch.randn(2, 4), y=torch.randn(4, 5))


def test_profiles_and_replace_keep_shared_dims():
    import dataclasses

    spec = Input(profiles=[{"min": (1, 4), "opt": (2, 4), "max": (4, 4)},
                           {"min": (4, 4), "opt": (8, 4), "max": (16, 4)}],
                 shared_dims={0: "batch"})
    assert spec.profile(1).shared_dims == ((0, "batch"),)
    assert dataclasses.replace(spec, name="x").shared_dims == ((0, "batch"),)
    static = Input(profiles=[{"min": (1, 4), "opt": (2, 4), "max": (4, 4)},
                             {"min": (8, 4), "opt": (8, 4), "max": (8, 4)}],
                   shared_dims={0: "batch"})
    assert static.profile(1).shared_dims == ()  # that profile fixes the dim


def test_a_static_example_never_declares_a_shared_name():
    assert Input(shape=(2, 3)).shared_dims == ()
    with pytest.raises(ValueError, match="static"):
        Input(shape=(2, 3), shared_dims={0: "batch"})
