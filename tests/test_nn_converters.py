"""Neural-network converters beyond single-op numerics: convolution weights shared with the
model and recorded for refit, and validator reasons that send unsupported variants (pooling
indices) to PyTorch, and fractional resize scales converted."""

import pytest
import torch
import torch.nn.functional as F

import torch_trt_ref
from torch_trt_ref.accuracy import judge
from torch_trt_ref.runtime.module import EngineModule


class ConvBlock(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.up = torch.nn.ConvTranspose2d(4, 2, 2, stride=2)

    def forward(self, x):
        return self.up(torch.relu(self.conv(x)))


def _engines(compiled):
    return [m for m in compiled.modules() if isinstance(m, EngineModule)]


def test_convolution_weights_are_owned_and_recorded_for_refit():
    model = ConvBlock().eval()
    x = torch.randn(1, 3, 8, 8)
    compiled = torch_trt_ref.compile(model, (x,), executor="reference", min_block_size=1)
    (engine,) = [m.engine for m in _engines(compiled)]
    layers = {layer.kind: layer for layer in engine.snapshot.layers}
    # the snapshot reads kernel/bias back from TensorRT and holds the compiled module's own
    # copy of them (design D11), not the model's storage
    for kind, module in (("CONVOLUTION", model.conv), ("DECONVOLUTION", model.up)):
        attrs = layers[kind].attrs
        assert torch.equal(attrs["kernel"], module.weight.detach().reshape(-1))
        assert torch.equal(attrs["bias"], module.bias.detach())
        assert attrs["kernel"].data_ptr() != module.weight.data_ptr()
        assert attrs["bias"].data_ptr() != module.bias.data_ptr()
    params = set(engine.refit_map)
    assert {"conv.weight", "conv.bias", "up.weight", "up.bias"} <= params
    with torch.no_grad():
        assert torch.allclose(compiled(x), model(x), atol=1e-5)


def _reasons(compiled) -> str:
    return str(compiled.compile_report.support["reasons"])


def test_max_pool_indices_output_stays_in_pytorch():
    class PoolWithIndices(torch.nn.Module):
        def forward(self, x):
            values, indices = F.max_pool2d(x, 2, return_indices=True)
            return values + 1, indices

    x = torch.randn(1, 2, 4, 4)
    compiled = torch_trt_ref.compile(PoolWithIndices(), (x,), executor="reference",
                                     min_block_size=1)
    assert "indices output of max pooling" in _reasons(compiled)
    values, indices = compiled(x)
    expected_values, expected_indices = F.max_pool2d(x, 2, return_indices=True)
    assert torch.equal(indices, expected_indices)
    assert torch.allclose(values, expected_values + 1)


def test_fractional_upsample_scale_converts():
    """A fractional scale factor (output floor(5 * 1.5) = 7, sampled at ATen's 1/scale
    positions) converts since issue 16 instead of falling back."""
    class Up(torch.nn.Module):
        def forward(self, x):
            return F.interpolate(x, scale_factor=1.5, mode="bilinear") + 1

    x = torch.randn(1, 2, 5, 5)
    # An ExportedProgram keeps upsample_bilinear2d.vec whole, so its validator decides.
    program = torch.export.export(Up(), (x,))
    compiled = torch_trt_ref.compile(program, (x,), executor="reference", min_block_size=1)
    assert "fractional output size" not in _reasons(compiled)
    assert not compiled.compile_report.fallbacks
    expected64 = F.interpolate(x.double(), scale_factor=1.5, mode="bilinear") + 1
    assert judge(compiled(x), Up()(x), expected64).passed


@pytest.mark.parametrize("padding_mode", ["zeros", "reflect", "replicate", "circular"])
@pytest.mark.parametrize("conv", [
    lambda mode: torch.nn.Conv1d(2, 3, 1, stride=8, padding=2, padding_mode=mode),
    lambda mode: torch.nn.Conv2d(2, 3, 2, stride=(5, 7), padding=(2, 1), dilation=2,
                                 padding_mode=mode),
], ids=["1d", "2d"])
def test_convolution_with_stride_past_the_padded_input_runs(conv, padding_mode):
    """Issue 21: one window of a stride larger than input plus padding; the rows past it
    (more than the input holds) made the compiled module raise at run time."""
    model = conv(padding_mode).eval()
    x = torch.randn(1, 2, 3) if isinstance(model, torch.nn.Conv1d) else torch.randn(1, 2, 3, 3)
    compiled = torch_trt_ref.compile(model, (x,), min_block_size=1)
    assert compiled.compile_report.counts.get("torch", 0) == 0
    torch.testing.assert_close(compiled(x), model(x))
