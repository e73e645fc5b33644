"""torchvision ResNet-18 and MobileNetV2 (random weights, calibrated batch-norm statistics)
compile fully to TensorRT and match eager fp32 within 1e-3 through the reference executor."""

import pytest
import torch

import torch_trt_ref

torchvision = pytest.importorskip("torchvision")


def _calibrated(name: str) -> torch.nn.Module:
    """Random weights; batch-norm running statistics from one random batch, so activations
    stay O(1) (fresh statistics shrink MobileNetV2's logits to ~1e-9, which would make any
    error bound vacuous)."""
    torch.manual_seed(0)
    model = torchvision.models.get_model(name, weights=None)
    for module in model.modules():
        if isinstance(module, torch.nn.BatchNorm2d):
            module.momentum = None  # cumulative average: one batch sets the statistics
    model.train()
    with torch.no_grad():
        model(torch.randn(4, 3, 224, 224))
    return model.eval()


@pytest.mark.slow
@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v2"])
def test_torchvision_model_fp32(name):
    model = _calibrated(name)
    x = torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(1))
    compiled = torch_trt_ref.compile(model, (x,), executor="reference")
    report = compiled.compile_report
    assert report.fallbacks == {}
    targets = [seg["target"] for seg in report.partition["segments"]]
    assert targets == ["tensorrt"], f"expected one TensorRT segment, got {targets}"
    used = report.engines[0].converters
    assert used["aten.convolution.default"] == {"resnet18": 20, "mobilenet_v2": 52}[name]
    with torch.no_grad():
        expected = model(x)
        actual = compiled(x)
    assert expected.abs().max() > 0.1  # a meaningful scale for the absolute bound below
    assert (actual - expected).abs().max().item() < 1e-3
