"""The tie-aware oracle (torch_trt_ref/quantization/ties.py, docs/quantization.md "Rounding
ties"): a quantizer code may differ by one step only where its float64 input is within
eager's fp32 error (times k) of a rounding boundary. Wrong results must still fail: a flip
at a decided element, every code one step off, a tie in an input no arithmetic touched."""

import pytest
import torch
from torch import nn

from torch_trt_ref.accuracy import judge
from torch_trt_ref.quantization import quantize, quantizers
from torch_trt_ref.quantization.ties import ambiguous_sites, judge_tie_aware

X = torch.randn(128, 256, generator=torch.Generator().manual_seed(0))


def _noisy_model():
    """Linear (fp32 arithmetic: noise) -> quantized Linear: the second layer's input
    quantizer has 7 ambiguous elements, none of which eager fp32 itself rounds the other way
    (so the plain rule has no slack for one)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 256), nn.Tanh(), nn.Linear(256, 256), nn.Linear(256, 8))
    return quantize(model.eval(), [X], precision="int8", skip=["0", "2"], progress=False)


def _shifted(model, name, where, steps):
    """The fp32 eager output with the codes of quantizer ``name`` at flat indices ``where``
    moved by ``steps`` quantization steps (a simulated compiled result)."""
    q = quantizers(model)[name]

    def hook(module, inputs, output):
        out = output.clone()
        scale = float(module.amax) / 127
        out.view(-1)[where] += steps * scale * torch.sign(inputs[0].flatten()[where] - out.view(
            -1)[where] + 1e-30)
        return out

    handle = q.register_forward_hook(hook)
    try:
        with torch.no_grad():
            return model(X)
    finally:
        handle.remove()


@pytest.fixture(scope="module")
def noisy():
    model = _noisy_model()
    with torch.no_grad():
        eager = model(X)
    _, sites, _ = ambiguous_sites(model, (X,), {})
    return model, eager, sites


def test_ambiguous_elements_are_found_only_downstream_of_arithmetic(noisy):
    _, _, sites = noisy
    assert [s.name for s in sites] == ["3.input_quantizer"]  # not the weights (exact)
    assert 0 < len(sites[0].ambiguous) <= 64 and sites[0].bound > 0


def test_flip_at_a_tie_passes_only_tie_aware(noisy):
    model, eager, sites = noisy
    i = sites[0].ambiguous[0]
    compiled = _shifted(model, "3.input_quantizer", [i], 1)
    out64 = ambiguous_sites(model, (X,), {})[0]
    assert not judge(compiled, eager, out64).passed  # the plain rule: one step is too much
    verdict, record = judge_tie_aware(model, (X,), {}, compiled, eager)
    assert verdict.passed, verdict.message
    assert record["flipped"] == [{"quantizer": "3.input_quantizer", "call": 0, "index": i}]
    assert "tie-aware: 1 of" in verdict.message


def test_flip_at_a_decided_element_fails(noisy):
    model, eager, sites = noisy
    decided = next(j for j in range(X.numel()) if j not in sites[0].ambiguous)
    compiled = _shifted(model, "3.input_quantizer", [decided], 1)
    verdict, record = judge_tie_aware(model, (X,), {}, compiled, eager)
    assert not verdict.passed and record["flipped"] == []
    both = _shifted(model, "3.input_quantizer", [sites[0].ambiguous[0], decided], 1)
    verdict, _ = judge_tie_aware(model, (X,), {}, both, eager)
    assert not verdict.passed  # the tie is explained, the other flip is not


def test_every_code_one_step_off_fails(noisy):
    model, eager, _ = noisy
    compiled = _shifted(model, "3.input_quantizer", list(range(0, X.numel(), 7)), 1)
    verdict, _ = judge_tie_aware(model, (X,), {}, compiled, eager)
    assert not verdict.passed


def test_exact_ties_without_upstream_noise_must_round_as_the_oracle():
    """The first layer's input quantizer reads the model input: eager error 0, no allowance,
    so a tie rounded the other way (half to odd) fails."""
    model = quantize(nn.Linear(4, 2).eval(), [torch.ones(1, 4) * 2.54], precision="int8",
                     progress=False)
    model.input_quantizer.amax = torch.tensor(127 / 16)  # scale 2**-4: exact ties
    scale = 1 / 16
    x = torch.tensor([[0.5, 1.5, -2.5, 3.0]]) * scale  # exact ties of the grid (half to even)
    with torch.no_grad():
        eager = model(x)
    _, sites, _ = ambiguous_sites(model, (x,), {})
    assert sites == []
    w = model.weight_quantizer(model.weight)
    odd = torch.tensor([[1.0, 1.0, -3.0, 3.0]]) * scale  # ties rounded away from even
    compiled = nn.functional.linear(odd, w, model.bias).detach()
    verdict, record = judge_tie_aware(model, (x,), {}, compiled, eager)
    assert not verdict.passed and record["ambiguous"] == 0
