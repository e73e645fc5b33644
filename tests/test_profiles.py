"""Several optimization profiles in one engine (``Input(profiles=...)``): the envelope is
captured, the engine is built with one profile per entry, the runtime picks the first
profile that holds a call or the pinned one, and a call outside every profile is a clear
error naming them."""

from __future__ import annotations

import pytest
import torch

import torch_trt_ref
from torch_trt_ref.runtime.profiles import last_profiles, optimization_profile

PROFILES = [{"min": (2, 4), "opt": (8, 4), "max": (16, 4)},
            {"min": (1, 4), "opt": (1, 4), "max": (1, 4)}]


class Step(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2 + x.sum(-1, keepdim=True)


@pytest.fixture(scope="module")
def compiled():
    inp = torch_trt_ref.Input(profiles=PROFILES)
    return torch_trt_ref.compile(Step().eval(), [inp], executor="reference", min_block_size=1)


def test_input_envelope_and_errors():
    inp = torch_trt_ref.Input(profiles=PROFILES)
    assert (inp.min_shape, inp.opt_shape, inp.max_shape) == ((1, 4), (8, 4), (16, 4))
    assert inp.profile(1).max_shape == (1, 4) and inp.profile_count == 2
    with pytest.raises(ValueError, match="keys 'min', 'opt'"):
        torch_trt_ref.Input(profiles=[{"min": (1,), "max": (2,)}])
    with pytest.raises(ValueError, match="not both"):
        torch_trt_ref.Input(shape=(1, 4), profiles=PROFILES)
    with pytest.raises(ValueError, match="ranks differ"):
        torch_trt_ref.Input(profiles=[PROFILES[0], {"min": (1,), "opt": (1,), "max": (1,)}])


def test_engine_holds_every_profile(compiled):
    (engine,) = compiled.compile_report.engines
    assert [p["max"] for p in engine.inputs[0]["profiles"]] == [[16, 4], [1, 4]]


def test_auto_picks_first_profile_that_holds(compiled):
    for rows, profile in ((1, 1), (2, 0), (16, 0)):
        x = torch.randn(rows, 4)
        torch.testing.assert_close(compiled(x), Step()(x))
        assert set(last_profiles(compiled).values()) == {profile}


def test_pinned_profile(compiled):
    with optimization_profile(compiled, 0):
        with pytest.raises(ValueError, match=r"outside profile 0 \(profile 0: x min=\(2, 4\)"):
            compiled(torch.randn(1, 4))
    compiled(torch.randn(1, 4))  # "auto" again after the block
    with pytest.raises(ValueError, match="has 2 optimization profile"):
        optimization_profile(compiled, 2)


def test_outside_every_profile_names_them(compiled):
    with pytest.raises(ValueError, match=r"outside any optimization profile \(profile 0: .*"
                       r"max=\(16, 4\); profile 1: x min=\(1, 4\) max=\(1, 4\)\)"):
        compiled(torch.randn(17, 4))


def test_profiles_survive_save_load(compiled, tmp_path):
    path = tmp_path / "m.pt2"
    torch_trt_ref.save(compiled, str(path))
    loaded = torch_trt_ref.load(str(path))
    x = torch.randn(1, 4)
    torch.testing.assert_close(loaded(x), Step()(x))


class _NoScan(list):
    def __iter__(self):
        raise AssertionError("the engine's layers were scanned on a call")


@pytest.mark.parametrize("dynamic", [False, True])
def test_a_call_does_not_scan_the_engine_s_layers(dynamic):
    """Choosing the profile and finding the in-place outputs read what the engine holds,
    found once: a scan of every layer on each call made lgamma_graph's module 14% slower
    (the gate's A/B against 69d9405, bisected to f85f19b)."""
    from torch_trt_ref.runtime.module import EngineModule

    x = torch.randn(4, 4)
    spec = torch_trt_ref.Input(min_shape=(2, 4), opt_shape=(4, 4), max_shape=(8, 4)) \
        if dynamic else x
    compiled = torch_trt_ref.compile(Step().eval(), [spec], executor="reference",
                                     min_block_size=1)
    expected = compiled(x)
    for module in compiled.modules():
        if isinstance(module, EngineModule):
            module.engine.snapshot.layers = _NoScan(module.engine.snapshot.layers)
    torch.testing.assert_close(compiled(x), expected)
