"""ConvTranspose quantization (docs/quantization.md): INT8 weights per channel along axis 1
of PyTorch's (in, out / groups, k...) kernel, the output maps of TensorRT's deconvolution;
the validator accepts exactly that and rejects axis 0 or a grouped kernel with a reason."""

import copy

import pytest
import torch
from torch import nn

import torch_trt_ref
from torch_trt_ref.accuracy import judge
from torch_trt_ref.quantization import quantize, quantizers
from torch_trt_ref.runtime.module import EngineModule

qop = torch.ops.tensorrt.quantize_op


def _decoder():
    """A tiny encoder-decoder: a strided Conv2d down, two ConvTranspose2d up."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.ReLU(),
                         nn.ConvTranspose2d(8, 4, 4, stride=2, padding=1), nn.ReLU(),
                         nn.ConvTranspose2d(4, 3, 3, padding=1)).eval()


DATA = [torch.randn(2, 3, 16, 16, generator=torch.Generator().manual_seed(i)) for i in range(3)]
X = torch.randn(2, 3, 16, 16, generator=torch.Generator().manual_seed(9))


def _compiled(qm, x):
    compiled = torch_trt_ref.compile(qm, [x], min_block_size=1)
    verdict = judge(compiled(x), qm(x), copy.deepcopy(qm).double()(x.double()))
    assert verdict.passed, verdict.message
    kinds = [layer.kind for m in compiled.modules() if isinstance(m, EngineModule)
             for layer in m.engine.snapshot.layers]
    return compiled, kinds


@pytest.mark.parametrize("precision, weight_amax", [
    ("int8", [(8, 1, 1, 1), (1, 4, 1, 1), (1, 3, 1, 1)]), ("fp8", [(), (), ()])])
def test_decoder_passes_float64_rule_in_one_engine(precision, weight_amax):
    qm = quantize(_decoder(), DATA, precision=precision, progress=False)
    found = quantizers(qm)
    assert [tuple(found[f"{i}.weight_quantizer"].amax.shape) for i in (0, 2, 4)] == weight_amax
    compiled, kinds = _compiled(qm, X)
    assert compiled.compile_report.counts == {"tensorrt": 1}
    assert kinds.count("QUANTIZE") == kinds.count("DEQUANTIZE") == 6
    assert kinds.count("DECONVOLUTION") == 2


@pytest.mark.parametrize("layer, x", [
    (nn.ConvTranspose1d(4, 6, 3, stride=2), torch.randn(2, 4, 9)),
    (nn.ConvTranspose3d(4, 6, 2, stride=2), torch.randn(1, 4, 3, 4, 4))])
def test_conv_transpose_1d_3d(layer, x):
    torch.manual_seed(1)
    qm = quantize(nn.Sequential(layer, nn.ReLU()).eval(), [x], precision="int8",
                  progress=False)
    assert qm[0].weight_quantizer.amax.shape[1] == 6
    compiled, kinds = _compiled(qm, x)
    assert compiled.compile_report.counts == {"tensorrt": 1} and kinds.count("QUANTIZE") == 2


def test_grouped_conv_transpose_weight_is_per_tensor():
    torch.manual_seed(2)
    model = nn.Sequential(nn.ConvTranspose2d(4, 6, 3, groups=2), nn.ReLU()).eval()
    x = torch.randn(2, 4, 5, 5)
    qm = quantize(model, [x], precision="int8", progress=False)
    assert qm[0].weight_quantizer.amax.numel() == 1
    compiled, _ = _compiled(qm, x)
    assert compiled.compile_report.counts == {"tensorrt": 1}


class _RawDeconv(nn.Module):
    """A ConvTranspose2d whose weight quantizer amax is given directly."""

    def __init__(self, amax, groups=1):
        super().__init__()
        torch.manual_seed(3)
        self.deconv = nn.ConvTranspose2d(4, 6, 3, groups=groups)
        self.register_buffer("amax", amax)
        self.eval()

    def forward(self, x):
        w = qop(self.deconv.weight, self.amax, 8, 0, False, True)
        return nn.functional.conv_transpose2d(x, w, self.deconv.bias,
                                              groups=self.deconv.groups).relu()


@pytest.mark.parametrize("module, reason", [
    (_RawDeconv(torch.full((4, 1, 1, 1), 0.5)), "read by a deconvolution"),
    (_RawDeconv(torch.full((1, 3, 1, 1), 0.5), groups=2), "grouped deconvolution"),
])
def test_validator_rejects_other_deconvolution_axes(module, reason):
    x = torch.randn(2, 4, 5, 5)
    compiled = torch_trt_ref.compile(module, [x], min_block_size=1)
    why = compiled.compile_report.support["quantizers"]
    assert any(reason in w for w in why.values()), why
    torch.testing.assert_close(compiled(x), module(x))


def test_validator_accepts_axis_1_of_a_deconvolution():
    module = _RawDeconv(torch.full((1, 6, 1, 1), 0.5))
    x = torch.randn(2, 4, 5, 5)
    compiled = torch_trt_ref.compile(module, [x], min_block_size=1)
    assert compiled.compile_report.counts == {"tensorrt": 1}
    torch.testing.assert_close(compiled(x), module(x))
