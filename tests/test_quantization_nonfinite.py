"""Non-finite calibration data and weights (issue 36, item 1): ``max`` calibration of a
batch holding NaN/inf is an error naming the layer, the quantizer and the batch;
``percentile`` and ``entropy`` leave those values out with a warning that counts them (an
error when nothing finite is left); a non-finite weight is an error naming the parameter."""

import warnings

import pytest
import torch

from torch_trt_ref.quantization import quantize, quantizers
from torch_trt_ref.quantization.calibrate import HistogramCalibrator

PRECISIONS = ["int8", "fp8", "nvfp4"]


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(),
                               torch.nn.Linear(16, 4)).eval()


def _batches(bad):
    """Three batches; batch 1 holds three non-finite values (``bad``) in its first row."""
    data = [torch.randn(2, 16, generator=torch.Generator().manual_seed(i)) for i in range(3)]
    data[1][0, :3] = bad
    return data


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_max_calibration_of_a_non_finite_batch_is_an_error(precision, bad):
    with pytest.raises(ValueError, match=r"quantize: layer '0', input quantizer: calibration "
                       r"batch 1 \(counting from 0\) holds 3 non-finite values \(NaN/inf\), so "
                       r"its amax would not be finite; .*algorithm='percentile' or 'entropy'"):
        quantize(_model(), _batches(bad), precision=precision, progress=False)


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("algorithm", ["percentile", "entropy"])
def test_histograms_leave_non_finite_values_out_with_a_warning(precision, algorithm):
    data = _batches(float("nan"))
    with pytest.warns(UserWarning, match=rf"non-finite calibration values \(NaN/inf\) left out "
                      rf"of the {algorithm} histograms: layer '0', input quantizer: 3 in batches "
                      r"\[1\]; layer '2', input quantizer: \d+ in batches \[1\]"):
        q = quantize(_model(), data, precision=precision, algorithm=algorithm,
                     progress=False)
    found = quantizers(q)
    assert all(torch.isfinite(qz.amax).all() for qz in found.values())
    reference = HistogramCalibrator(algorithm)  # the finite values alone, in the same order
    for batch in data:
        reference.collect(batch[batch.isfinite()])
    assert float(found["0.input_quantizer"].amax) == float(reference.compute())
    clean = [data[0], data[2]]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # finite data: no warning
        quantize(_model(), clean, precision=precision, algorithm=algorithm, progress=False)


@pytest.mark.parametrize("algorithm", ["percentile", "entropy"])
def test_a_histogram_with_no_finite_value_is_an_error(algorithm):
    with pytest.raises(ValueError, match=r"layer '0', input quantizer: every calibration value "
                       r"it saw was non-finite \(NaN/inf; batches \[0\]\)"):
        quantize(_model(), [torch.full((2, 16), float("nan"))], algorithm=algorithm,
                 progress=False)


@pytest.mark.parametrize("precision, per_channel", [("int8", True), ("fp8", False),
                                                    ("nvfp4", False)])
@pytest.mark.parametrize("algorithm", ["max", "percentile"])
def test_non_finite_weights_are_an_error_naming_the_parameter(precision, per_channel,
                                                              algorithm):
    model = _model()
    with torch.no_grad():
        model[2].weight[1, 5] = float("inf")
        model[2].weight[3, 0] = float("nan")
    with pytest.raises(ValueError, match=r"quantize: parameter 2.weight holds 2 non-finite "
                       r"values \(NaN/inf\) of 64, .* skip=\['2'\]"):
        quantize(model, _batches(0.0), precision=precision, algorithm=algorithm,
                 progress=False)
    q = quantize(model, _batches(0.0), precision=precision, algorithm=algorithm,
                 skip=["2"], progress=False)
    assert (quantizers(q)["0.weight_quantizer"].amax.dim() > 0) == per_channel


def test_weight_amax_is_the_weights_max_whatever_the_algorithm():
    """docs/quantization.md: "Weight amax is always the weight's max" (FP8's weights are per
    tensor; they were calibrated by the activations' percentile before)."""
    model = _model()
    q = quantize(model, _batches(0.0), precision="fp8", algorithm="percentile",
                 progress=False)
    top = float(model[0].weight.detach().abs().max())
    assert float(quantizers(q)["0.weight_quantizer"].amax) == top
