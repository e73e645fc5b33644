"""torchvision classifiers with random weights (``weights=None``) on one 224x224 image."""

from __future__ import annotations

import functools

import torch

from torch_trt_ref import Input

from ..entry import ZooEntry, seeded, tolerances

IMAGE = (1, 3, 224, 224)


def _image() -> tuple[tuple, dict]:
    return (torch.randn(IMAGE, generator=seeded()),), {}


def calibrate_batchnorm(model: torch.nn.Module, batch: int = 4) -> torch.nn.Module:
    """Set BatchNorm running statistics from one seeded random batch (cumulative average).

    With freshly initialized statistics (mean 0, var 1) nothing normalizes the activations
    of a random network, and MobileNet/EfficientNet outputs shrink to ~1e-9 (ResNet-50's
    grow to ~100): an accuracy check on those numbers says nothing. Calibrated statistics
    give O(1) activations, as in a trained network; the weights stay random."""
    norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if not norms:
        return model
    for m in norms:
        m.reset_running_stats()
        m.momentum = None
    model.train()
    with torch.no_grad():
        model(torch.randn((batch,) + IMAGE[1:], generator=seeded(1)))
    return model.eval()


def randomize_zero_linears(model: torch.nn.Module) -> torch.nn.Module:
    """Give zero-initialized Linear weights (torchvision ViT's classifier head) small random
    values, so the output is not identically zero and accuracy means something."""
    for m in model.modules():
        if isinstance(m, torch.nn.Linear) and not m.weight.detach().any():
            torch.nn.init.normal_(m.weight, std=0.02)
    return model


def _torchvision(name: str) -> torch.nn.Module:
    import torchvision

    model = torchvision.models.get_model(name, weights=None)
    return calibrate_batchnorm(randomize_zero_linears(model))


def _entry(name: str, description: str, tags=(), **tol: float) -> ZooEntry:
    # opt batch 2: torch.export specializes a dim whose example value is 0 or 1
    dynamic = ((Input(min_shape=(1, 3, 224, 224), opt_shape=(2, 3, 224, 224),
                      max_shape=(4, 3, 224, 224)),), {})
    return ZooEntry(name, functools.partial(_torchvision, name), _image, dynamic,
                    tolerances(**tol), ("vision", "torchvision", *tags), description)


ENTRIES = [
    _entry("resnet18", "torchvision ResNet-18 (11.7M params)", ("quick",)),
    _entry("resnet50", "torchvision ResNet-50 (25.6M params)", fp16=0.2, bf16=1.0),
    _entry("mobilenet_v2", "torchvision MobileNetV2 (3.5M params)", ("quick",)),
    _entry("mobilenet_v3_small", "torchvision MobileNetV3-Small (2.5M params)"),
    _entry("mobilenet_v3_large", "torchvision MobileNetV3-Large (5.5M params; GPU latency)"),
    _entry("efficientnet_b0", "torchvision EfficientNet-B0 (5.3M params)"),
    _entry("convnext_tiny", "torchvision ConvNeXt-Tiny (28.6M params)"),
    _entry("vit_b_16", "torchvision ViT-B/16 (86.6M params)"),
    _entry("swin_t", "torchvision Swin-T (28.3M params)"),
]
