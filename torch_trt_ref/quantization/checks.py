"""What ``quantize`` checks in its arguments and data, with errors naming what was wrong:
precision, algorithm and percentile; ``skip`` names; non-finite weights; non-finite
calibration values (``max``: an error naming the batch; histograms: left out, one
warning)."""

from __future__ import annotations

import warnings
from typing import Any, Iterable

import torch
from torch import nn

from ..settings import QUANT_FORMATS, did_you_mean
from . import calibrate

# (num_bits, exponent_bits) of each quantization format
FORMAT_BITS = dict(zip(QUANT_FORMATS, ((8, 0), (8, 4), (4, 2))))


def arguments(precision: str, algorithm: str, percentile: float) -> None:
    """A ValueError for a precision, algorithm or percentile ``quantize`` does not take."""
    for name, value, accepted in (("precision", precision, FORMAT_BITS),
                                  ("algorithm", algorithm, calibrate.ALGORITHMS)):
        if value not in accepted:
            hint = did_you_mean(value.lower(), accepted) if isinstance(value, str) else ""
            raise ValueError(f"quantize: {name}={value!r} is not one of "
                             f"{', '.join(accepted)}{hint}")
    number = isinstance(percentile, (int, float)) and not isinstance(percentile, bool)
    if not number or not 0 < percentile <= 100:
        raise ValueError(f"quantize: percentile={percentile!r} must be a number in (0, 100]")


def batches(data: Any) -> Any:
    """``calibration_data`` as a sized collection of batches: a tensor or a dict (of keyword
    inputs) is one batch; an iterable without a length is listed."""
    if isinstance(data, (torch.Tensor, dict)):
        return [data]
    if isinstance(data, (str, bytes)) or not isinstance(data, Iterable):
        raise TypeError(f"quantize: calibration_data must be an iterable of batches (each a "
                        f"tensor, a tuple of positional inputs or a dict of keyword inputs), "
                        f"got {type(data).__name__}")
    return data if hasattr(data, "__len__") else list(data)


def skip_names(model: nn.Module, skip: Iterable[str] | str | None) -> tuple[str, ...]:
    """``skip`` as a tuple of module names (one string is one name, None none), each naming a
    module of ``model`` or a prefix of module names; a name that matches nothing (a typo
    would quantize the layer meant to stay in full precision) is a ValueError with the
    closest module names."""
    skip = () if skip is None else (skip,) if isinstance(skip, str) else tuple(skip)
    bad = [s for s in skip if not isinstance(s, str)]
    if bad:
        raise TypeError(f"quantize: skip takes module names (str), like those of "
                        f"model.named_modules(); got {bad[0]!r}")
    names = [n for n, _ in model.named_modules() if n]
    unknown = [s for s in skip if not any(n == s or n.startswith(s + ".") for n in names)]
    if unknown:
        hints = ", ".join(f"{s!r}{did_you_mean(s, names, n=3)}" for s in unknown)
        raise ValueError(f"quantize: skip names no module of the model: {hints}; skip takes "
                         "names of model.named_modules() (a name also skips the modules "
                         "under it)")
    return skip


def listed(reasons: dict[str, str], limit: int = 8) -> str:
    items = [f"{repr(name) if name else 'the model'} ({why})" for name, why in reasons.items()]
    more = f"; and {len(items) - limit} more" if len(items) > limit else ""
    return "; ".join(items[:limit]) + more


def site(name: str) -> str:
    """A quantizer's module name for a user: "layer 'fc', input quantizer"."""
    layer, _, quantizer = name.rpartition(".")
    if layer == "attention_quantizers" or layer.endswith(".attention_quantizers"):
        layer, quantizer = layer.rpartition(".")[0], f"attention quantizer {quantizer}"
    else:
        quantizer = quantizer.replace("_", " ")
    return f"layer {layer or '(the model)'!r}, {quantizer}"


def check_weights(model: nn.Module, names: list[str]) -> None:
    """A weight with NaN or inf has no finite amax: a ValueError naming the parameter."""
    for name in names:
        weight = model.get_submodule(name).weight.detach()
        bad = calibrate.nonfinite(weight)
        if bad:
            raise ValueError(
                f"quantize: parameter {name}.weight holds {bad} non-finite values (NaN/inf) "
                f"of {weight.numel()}, so its weight quantizer has no finite amax; fix the "
                f"weights, or keep the layer in full precision with skip=[{name!r}]")


def check_batch(found: dict[str, Any], seen: dict[str, int], index: int,
                 dropped: dict[str, list[int]]) -> None:
    """After calibration batch ``index``: a max calibrator that saw NaN or inf (its amax is
    not finite) is a ValueError naming the quantizer and the batch; a histogram calibrator's
    non-finite values were left out, recorded in ``dropped`` for one warning."""
    for name, q in found.items():
        new = q.calibrator.nonfinite - seen[name]
        if not new:
            continue
        if isinstance(q.calibrator, calibrate.MaxCalibrator):
            raise ValueError(
                f"quantize: {site(name)}: calibration batch {index} (counting from 0) holds "
                f"{new} non-finite values (NaN/inf), so its amax would not be finite; fix or "
                "drop that batch, or calibrate with algorithm='percentile' or 'entropy', "
                "which leave non-finite values out")
        dropped.setdefault(name, []).append(index)


def warn_dropped(found: dict[str, Any], dropped: dict[str, list[int]],
                  algorithm: str) -> None:
    """One warning counting the non-finite values the histograms left out; a ValueError
    for a quantizer that saw no finite value at all."""
    if not dropped:
        return
    for name in dropped:
        if found[name].calibrator.hist is None:
            raise ValueError(f"quantize: {site(name)}: every calibration value it saw was "
                             f"non-finite (NaN/inf; batches {dropped[name]}), so no amax "
                             "can be calibrated; fix the calibration data")
    lines = [f"{site(n)}: {found[n].calibrator.nonfinite} in batches {b}"
             for n, b in dropped.items()]
    warnings.warn(f"quantize: non-finite calibration values (NaN/inf) left out of the "
                  f"{algorithm} histograms: " + "; ".join(lines), stacklevel=3)
