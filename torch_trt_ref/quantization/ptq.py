"""Post-training quantization (our own API): ``quantize(model, calibration_data, ...)`` puts
quantizers on the inputs and weights of Linear/Conv layers, calibrates their ``amax`` over
the calibration batches and returns a model whose forward calls the ``tensorrt::`` ops."""

from __future__ import annotations

import copy
import sys
import time
import warnings
from typing import Any, Iterable

import torch
from torch import nn

from . import attention as attention_sites
from . import calibrate, checks, ops
from .checks import FORMAT_BITS

NVFP4_BLOCK = 16
QUANTIZABLE = (nn.Linear, nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose1d,
               nn.ConvTranspose2d, nn.ConvTranspose3d)
_CONV_TRANSPOSE = {1: nn.functional.conv_transpose1d, 2: nn.functional.conv_transpose2d,
                   3: nn.functional.conv_transpose3d}


class TensorQuantizer(nn.Module):
    """One quantizer: calls ``tensorrt::quantize_op`` (INT8, FP8) or
    ``tensorrt::dynamic_block_quantize_op`` (NVFP4) with its ``amax`` buffer. While a
    calibrator is attached it only records what it sees and passes ``x`` through."""

    def __init__(self, precision: str, axis: int | None = None):
        super().__init__()
        self.precision, self.axis = precision, axis
        self.register_buffer("amax", torch.zeros(()))
        self.calibrator = None

    def extra_repr(self) -> str:
        axis = "per-tensor" if self.axis is None else f"per-channel axis={self.axis}"
        return f"{self.precision}, {axis}, amax={self.amax.flatten()[:4].tolist()}"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.calibrator is not None:
            self.calibrator.collect(x)
            return x
        num_bits, exponent_bits = FORMAT_BITS[self.precision]
        if self.precision == "nvfp4":
            if x.dim() > 3:  # TensorRT's NVFP4 takes 2-D/3-D: rows of the last dim, the same
                flat = x.reshape(-1, x.shape[-1])  # blocks (convnext's, swin's 4-D Linears)
                return ops.dynamic_block_quantize_op(flat, NVFP4_BLOCK, self.amax, 4, 2, 8,
                                                     4).reshape(x.shape)
            return ops.dynamic_block_quantize_op(x, NVFP4_BLOCK, self.amax, 4, 2, 8, 4)
        return ops.quantize_op(x, self.amax, num_bits, exponent_bits, False,
                               self.precision == "int8")


class _Quantized:
    """Mixin of the quantized Linear/Conv classes: the layer's own forward on the quantized
    input and weight. The parameters keep their names (``fc.weight``), so refit and
    state_dict see the original layer."""

    def forward(self, input: torch.Tensor, output_size: list[int] | None = None
                ) -> torch.Tensor:
        x, w = self.input_quantizer(input), self.weight_quantizer(self.weight)
        if isinstance(self, nn.Linear):
            return nn.functional.linear(x, w, self.bias)
        if isinstance(self, nn.modules.conv._ConvTransposeNd):
            nd = len(self.kernel_size)
            pad = self._output_padding(input, output_size, self.stride, self.padding,
                                       self.kernel_size, nd, self.dilation)
            return _CONV_TRANSPOSE[nd](x, w, self.bias, self.stride, self.padding, pad,
                                       self.groups, self.dilation)
        return self._conv_forward(x, w, self.bias)


_CLASSES: dict[type, type] = {}


def _quantized_class(cls: type) -> type:
    if cls not in _CLASSES:
        _CLASSES[cls] = type(f"Quant{cls.__name__}", (_Quantized, cls), {})
    return _CLASSES[cls]


def _skipped(skip: Iterable[str]):
    """Whether a module name is in ``skip`` (a name or a prefix of it)."""
    skip = tuple(skip)
    return lambda name: any(name == s or name.startswith(s + ".") for s in skip)


def _weight_axis(module: nn.Module, precision: str) -> int | None:
    """The per-channel axis of a weight quantizer: INT8 along the kernel's output channels,
    axis 0 of a Linear/Conv weight and axis 1 of a ConvTranspose weight (PyTorch's
    (in, out / groups, k...) layout; TensorRT's deconvolution kernel is per channel along
    its output maps). A grouped ConvTranspose (its axis 1 holds out / groups channels) and
    FP8 (TensorRT has no per-channel FP8) are per tensor."""
    if precision != "int8":
        return None
    if isinstance(module, nn.modules.conv._ConvTransposeNd):
        return 1 if module.groups == 1 else None
    return 0


def _insert(model: nn.Module, precision: str, skip: Iterable[str]
            ) -> tuple[list[str], dict[str, str]]:
    """Turn every Linear/Conv not named in ``skip`` (a name or a prefix) into its quantized
    class; returns the names of the quantized layers and, by name, why each Linear/Conv
    not in ``skip`` was left out (NVFP4: Linear layers whose reduction size divides by its
    block size only)."""
    skipped = _skipped(skip)
    done, left_out = [], {}
    for name, module in model.named_modules():
        if type(module) not in QUANTIZABLE or skipped(name):
            continue
        reason = _nvfp4_reason(module) if precision == "nvfp4" else None
        if reason:
            left_out[name] = reason
            continue
        weight_axis = _weight_axis(module, precision)
        module.__class__ = _quantized_class(type(module))
        module.input_quantizer = TensorQuantizer(precision)
        module.weight_quantizer = TensorQuantizer(precision, weight_axis)
        done.append(name)
    return done, left_out


def _nvfp4_reason(module: nn.Module) -> str | None:
    """Why NVFP4 leaves ``module`` out: it quantizes GEMMs in blocks of 16 along the
    reduction dim (TensorRT's NVFP4), so Linear layers whose in_features divide by 16."""
    if not isinstance(module, nn.Linear):
        return f"a {type(module).__name__}: NVFP4 quantizes Linear layers only"
    if module.in_features % NVFP4_BLOCK:
        return (f"in_features {module.in_features} is not a multiple of the NVFP4 block "
                f"size {NVFP4_BLOCK}")
    return None


def _call(model: nn.Module, batch: Any):
    if isinstance(batch, dict):
        return model(**batch)
    if isinstance(batch, (tuple, list)):
        return model(*batch)
    return model(batch)


def _progress(batches, total):
    from tqdm import tqdm

    return tqdm(batches, desc="calibrate", unit="batch", total=total, file=sys.stderr,
                dynamic_ncols=True)


def quantizers(model: nn.Module) -> dict[str, TensorQuantizer]:
    """The model's quantizers by module name."""
    return {n: m for n, m in model.named_modules() if isinstance(m, TensorQuantizer)}


def quantize(model: nn.Module, calibration_data: Iterable[Any], precision: str = "int8",
             algorithm: str = "max", skip: Iterable[str] = (), percentile: float = 99.99,
             progress: bool = True, inplace: bool = False, attention: bool = False
             ) -> nn.Module:
    """Quantize ``model`` for ``precision`` ('int8', 'fp8', 'nvfp4'): quantizers on the input
    (per-tensor) and weight (INT8: per-channel along the output channels, axis 0, or axis 1
    of a ConvTranspose; FP8: per-tensor; NVFP4: blocks of 16, Linear layers with
    in_features % 16 == 0 only) of every Linear, Conv1d/2d/3d and ConvTranspose1d/2d/3d not
    named in ``skip``. Activation ``amax`` is
    calibrated with ``algorithm`` ('max', 'percentile', 'entropy') over ``calibration_data``
    (an iterable of batches: each a tensor, a tuple of positional inputs or a dict of keyword
    inputs; a tensor or a dict alone is one batch); weight
    ``amax`` is the weight's max. ``attention``: also quantize both inputs of attention's
    Q·Kᵀ and P·V (per tensor, INT8/FP8; a fused scaled_dot_product_attention becomes one
    ``torch_trt_ref::quantized_sdpa`` op holding the q, k, v and P quantizers,
    docs/quantization.md). Returns an eval-mode copy (the model itself with
    ``inplace``); ``model.quantization`` records what was done."""
    checks.arguments(precision, algorithm, percentile)
    if attention and precision == "nvfp4":
        raise ValueError("quantize: attention=True takes precision 'int8' or 'fp8' (NVFP4 "
                         "quantizes the Linear layers' GEMMs only)")
    if not isinstance(model, nn.Module):
        raise TypeError(f"quantize: model must be a torch.nn.Module, got {type(model).__name__}")
    skip = checks.skip_names(model, skip)
    model = model if inplace else copy.deepcopy(model)
    batches = checks.batches(calibration_data)
    start, count, owners = time.perf_counter(), 0, []
    if attention and len(batches):  # before the layers' quantizers (amax 0 until calibrated)
        owners = attention_sites.insert(model.eval(), lambda: _call(model, next(iter(batches))),
                                        lambda: TensorQuantizer(precision), _skipped(skip))
        if not owners:
            raise ValueError("quantize: attention=True, but the model calls no "
                             "scaled_dot_product_attention and no softmax between two "
                             "matmuls of activations")
    names, left_out = _insert(model.eval(), precision, skip)
    if not names and left_out:
        raise ValueError(f"quantize: no layer of the model can be quantized in {precision}: "
                         f"{checks.listed(left_out)}" + (f"; skip={list(skip)}" if skip else ""))
    if not names:
        raise ValueError("quantize: the model has no Linear or Conv/ConvTranspose layer left "
                         f"to quantize (skip={list(skip)})")
    linears = {n: why for n, why in left_out.items()
               if isinstance(model.get_submodule(n), nn.Linear)}
    if linears:  # a Conv under NVFP4 is its documented scope; a Linear left out is news
        warnings.warn(f"quantize: {precision} leaves {len(linears)} Linear layers in full "
                      f"precision: {checks.listed(linears)}", stacklevel=2)
    checks.check_weights(model, names)
    found = quantizers(model)
    for name, q in found.items():
        q.calibrator = calibrate.make(algorithm, q.axis, percentile,
                                      weight=name.endswith(".weight_quantizer"))
    dropped: dict[str, list[int]] = {}  # quantizer -> batches whose non-finite values it left
    with torch.no_grad():
        for batch in (_progress(batches, len(batches)) if progress else batches):
            seen = {name: q.calibrator.nonfinite for name, q in found.items()}
            try:
                _call(model, batch)
            except Exception as err:  # the model's own error, with where it happened
                err.add_note(f"(raised by the model in quantize's calibration batch {count}, "
                             "counting from 0)")
                raise
            checks.check_batch(found, seen, count, dropped)
            count += 1
    if not count:
        raise ValueError("quantize: calibration_data is empty; pass at least one batch")
    checks.warn_dropped(found, dropped, algorithm)
    for name, q in found.items():
        amax = q.calibrator.compute()
        q.calibrator = None
        q.amax = torch.zeros(()) if amax is None else amax.detach().float().clone()
    model.eval()
    model.quantization = {"precision": precision, "algorithm": algorithm, "layers": names,
                          "left_out": left_out, "attention": owners,
                          "batches": count, "seconds": time.perf_counter() - start}
    return model
