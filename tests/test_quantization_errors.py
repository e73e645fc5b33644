"""``quantize``'s mistakes and edge cases (issue 36): non-finite calibration data (``max``:
an error naming the layer, the quantizer and the batch; ``percentile``/``entropy``: those
values left out with a warning counting them, an error when nothing finite is left) and
weights (an error naming the parameter); ``skip`` names that match no module (an error
with the close matches); NVFP4 layers whose reduction size does not divide by 16 (named,
the others quantized)."""

import warnings

import pytest
import torch

from torch_trt_ref.quantization import quantize, quantizers
from torch_trt_ref.quantization.calibrate import HistogramCalibrator

FORMATS = ["int8", "fp8", "nvfp4"]


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(),
                               torch.nn.Linear(16, 4)).eval()


def _batches(bad):
    """Three batches; batch 1 holds three non-finite values (``bad``) in its first row."""
    data = [torch.randn(2, 16, generator=torch.Generator().manual_seed(i)) for i in range(3)]
    data[1][0, :3] = bad
    return data


@pytest.mark.parametrize("precision", FORMATS)
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_max_calibration_of_a_non_finite_batch_is_an_error(precision, bad):
    with pytest.raises(ValueError, match=r"quantize: layer '0', input quantizer: calibration "
                       r"batch 1 \(counting from 0\) holds 3 non-finite values \(NaN/inf\), so "
                       r"its amax would not be finite; .*algorithm='percentile' or 'entropy'"):
        quantize(_model(), _batches(bad), precision=precision, progress=False)


@pytest.mark.parametrize("precision", FORMATS)
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


class _Named(torch.nn.Module):
    def __init__(self, hidden=16):
        super().__init__()
        self.encoder = torch.nn.Sequential(torch.nn.Linear(16, hidden), torch.nn.ReLU())
        self.head = torch.nn.Linear(hidden, 4)

    def forward(self, x):
        return self.head(self.encoder(x))


@pytest.mark.parametrize("skip, match", [
    (["haed"], r"skip names no module of the model: 'haed' \(did you mean 'head'\?\)"),
    (["encoder.O"], r"'encoder.O' \(did you mean 'encoder.1' or 'encoder.0' or "
                     r"'encoder'\?\)"),
    (["head", "nope"], r"skip names no module of the model: 'nope'; skip takes names of "
                       r"model.named_modules\(\)"),
    ("haed", r"'haed' \(did you mean 'head'\?\)"),  # one string is one name
])
def test_skip_names_that_match_no_module_are_an_error(skip, match):
    with pytest.raises(ValueError, match=match):
        quantize(_Named(), _batches(0.0), skip=skip, progress=False)


def test_skip_takes_names_prefixes_and_one_string():
    q = quantize(_Named(), _batches(0.0), skip="encoder", progress=False)
    assert q.quantization["layers"] == ["head"]
    q = quantize(_Named(), _batches(0.0), skip=["encoder.0"], progress=False)
    assert q.quantization["layers"] == ["head"]
    assert quantize(_Named(), _batches(0.0), skip=None,
                    progress=False).quantization["layers"] == ["encoder.0", "head"]
    with pytest.raises(TypeError, match=r"skip takes module names \(str\).*got 0"):
        quantize(_Named(), _batches(0.0), skip=[0], progress=False)


def test_nvfp4_names_the_layers_it_leaves_out_and_quantizes_the_others():
    model = _Named(hidden=10)  # head: in_features 10
    with pytest.warns(UserWarning, match=r"quantize: nvfp4 leaves 1 Linear layers in full "
                      r"precision: 'head' \(in_features 10 is not a multiple of the NVFP4 "
                      r"block size 16\)"):
        q = quantize(model, _batches(0.0), precision="nvfp4", progress=False)
    assert q.quantization["layers"] == ["encoder.0"]
    assert q.quantization["left_out"] == {
        "head": "in_features 10 is not a multiple of the NVFP4 block size 16"}
    torch.testing.assert_close(q.head(torch.ones(1, 10)), model.head(torch.ones(1, 10)))


def test_nvfp4_with_no_layer_left_names_each_and_why():
    model = torch.nn.Sequential(torch.nn.Conv1d(2, 16, 1), torch.nn.Flatten(),
                                torch.nn.Linear(16 * 3, 10), torch.nn.Linear(10, 4)).eval()
    with pytest.raises(ValueError, match=r"no layer of the model can be quantized in nvfp4: "
                       r"'0' \(a Conv1d: NVFP4 quantizes Linear layers only\); '3' "
                       r"\(in_features 10 is not a multiple of the NVFP4 block size 16\); "
                       r"skip=\['2'\]"):
        quantize(model, [torch.randn(2, 2, 3)], precision="nvfp4", skip=["2"], progress=False)
    with pytest.raises(ValueError, match=r"in nvfp4: the model \(in_features 10 is not"):
        quantize(torch.nn.Linear(10, 4), [torch.randn(2, 10)], precision="nvfp4",
                 progress=False)
