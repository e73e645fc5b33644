"""The quantizer ops with ModelOpt's schemas (``tensorrt::quantize_op``,
``tensorrt::dynamic_block_quantize_op``): registered here only when ModelOpt has not
registered them, with exact fake-quantization CPU kernels and fake (meta) kernels."""

from __future__ import annotations

import torch

# ModelOpt's schemas, argument for argument (modelopt/torch/quantization/tensor_quant.py), so
# a program quantized and exported with ModelOpt loads here, and ours load under ModelOpt.
SCHEMAS = {
    "quantize_op": "(Tensor input, Tensor amax, int num_bits, int exponent_bits, "
                   "bool unsigned, bool narrow_range) -> Tensor",
    "dynamic_block_quantize_op": "(Tensor input, int block_size, Tensor amax, int num_bits, "
                                 "int exponent_bits, int scale_num_bits, "
                                 "int scale_exponent_bits) -> Tensor",
    "dynamic_block_quantize_op.overload": "(Tensor input, int block_size, None amax, "
                                          "int num_bits, int exponent_bits, int scale_num_bits, "
                                          "int scale_exponent_bits) -> Tensor",
}
FP8_MAX = 448.0  # largest finite E4M3 value
FP4_MAX = 6.0  # largest E2M1 value
FP4_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)  # E2M1 magnitudes, ascending

# (num_bits, exponent_bits) -> format name; the formats TensorRT quantizes to.
FORMATS = {(8, 0): "int8", (8, 4): "fp8", (4, 2): "fp4"}


def format_of(num_bits: int, exponent_bits: int) -> str | None:
    """'int8', 'fp8' or 'fp4' for a (num_bits, exponent_bits) pair TensorRT has, else None."""
    return FORMATS.get((int(num_bits), int(exponent_bits)))


def int_bounds(num_bits: int, unsigned: bool, narrow_range: bool) -> tuple[int, int]:
    """(min, max) of the integer grid: signed 8-bit narrow range is [-127, 127]."""
    high = 2 ** (num_bits - (0 if unsigned else 1)) - 1
    low = 0 if unsigned else (-high if narrow_range else -high - 1)
    return low, high


# Note [Quantizer arithmetic]: the quantizer step runs in float32 whatever the input dtype,
# as TensorRT's IQuantizeLayer does (scale = amax / max_value, q = round(x / scale) half to
# even, saturated; x = q * scale): so the float64 run of a quantized model (the oracle, DESIGN
# D13) lands on the same grid points as the engine, and only the arithmetic *between*
# quantizers is float64. ModelOpt's own CPU kernels multiply by max_value / amax instead of
# dividing by the scale, which can move a value sitting on a rounding boundary by one step.
def fake_quantize(x: torch.Tensor, amax: torch.Tensor, num_bits: int = 8,
                  exponent_bits: int = 0, unsigned: bool = False,
                  narrow_range: bool = True) -> torch.Tensor:
    """Quantize then dequantize ``x`` with scale amax / max_value (127 for INT8, 448 for FP8
    E4M3); ``amax`` is a scalar or broadcasts along one axis (per-channel). An amax of 0
    gives 0 (there is no grid)."""
    fmt = format_of(num_bits, exponent_bits)
    if fmt not in ("int8", "fp8") and not (exponent_bits == 0 and 2 <= num_bits <= 8):
        raise ValueError(f"quantize_op: unsupported (num_bits, exponent_bits) = "
                         f"({num_bits}, {exponent_bits}); supported: integer 2..8 bits, "
                         "or (8, 4) for FP8 E4M3")
    xf, a = x.float(), amax.float().to(x.device)
    if exponent_bits == 0:
        low, high = int_bounds(num_bits, unsigned, narrow_range)
        scale = a / high
        q = torch.round(xf / scale).clamp(low, high)
    else:
        scale = a / FP8_MAX
        q = (xf / scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn).float()
    out = torch.where(scale == 0, torch.zeros_like(xf), q * scale)
    return out.to(x.dtype)


def round_fp4(v: torch.Tensor) -> torch.Tensor:
    """Values rounded to nearest-even E2M1 (saturating at +-6), as float32."""
    table = torch.tensor(FP4_VALUES, device=v.device)
    a = v.abs().clamp(max=FP4_MAX).unsqueeze(-1)
    dist = (a - table).abs()
    best = dist.min(-1, keepdim=True).values
    ties = dist == best  # two candidates on a midpoint: the even code (even index) wins
    codes = torch.arange(len(FP4_VALUES), device=v.device)
    pick = torch.where(ties & (codes % 2 == 0), codes, len(FP4_VALUES)).min(-1).values
    pick = torch.where(ties.sum(-1) > 1, pick, dist.argmin(-1))
    return torch.copysign(table[pick], v)


def fake_block_quantize(x: torch.Tensor, block_size: int, amax: torch.Tensor | None,
                        num_bits: int = 4, exponent_bits: int = 2, scale_num_bits: int = 8,
                        scale_exponent_bits: int = 4) -> torch.Tensor:
    """NVFP4 fake quantization: blocks of ``block_size`` along the last dim, E2M1 data, E4M3
    block scales amax(block) / 6 / global, global scale = amax / (6 * 448)."""
    if (format_of(num_bits, exponent_bits), format_of(scale_num_bits, scale_exponent_bits)) \
            != ("fp4", "fp8"):
        raise ValueError("dynamic_block_quantize_op: only NVFP4 (num_bits=4, exponent_bits=2, "
                         "scale_num_bits=8, scale_exponent_bits=4) is supported, got "
                         f"({num_bits}, {exponent_bits}, {scale_num_bits}, "
                         f"{scale_exponent_bits})")
    if x.shape[-1] % block_size:
        raise ValueError(f"dynamic_block_quantize_op: last dim {x.shape[-1]} is not a multiple "
                         f"of block_size {block_size}")
    xf = x.float()
    a = xf.abs().amax() if amax is None else amax.float().reshape(()).to(x.device)
    data, scale8, global_scale = nvfp4_blocks(xf, block_size, a)
    return (data * (scale8.float() * global_scale)).reshape(x.shape).to(x.dtype)


def nvfp4_blocks(x: torch.Tensor, block_size: int, amax: torch.Tensor):
    """NVFP4 encoding of float32 ``x`` with global ``amax``: (E2M1 values, as float32, in
    blocks of ``block_size`` along the last dim: shape (..., n // block_size, block_size);
    E4M3 block scales (..., n // block_size, 1); the float32 global scale amax / (6 * 448))."""
    global_scale = amax / (FP4_MAX * FP8_MAX)
    blocks = x.reshape(*x.shape[:-1], x.shape[-1] // block_size, block_size)
    block_amax = blocks.abs().amax(-1, keepdim=True)
    scale8 = (block_amax / FP4_MAX / global_scale).clamp(max=FP8_MAX).to(torch.float8_e4m3fn)
    scale = scale8.float() * global_scale
    return round_fp4(torch.where(scale == 0, 0.0, blocks / scale)), scale8, global_scale


def fp4_codes(values: torch.Tensor) -> torch.Tensor:
    """E2M1 values (float32, on the grid) as TensorRT's FP4 held by the reference executor:
    ``float4_e2m1fn_x2`` with ONE code per byte (sign in bit 3, magnitude index in bits 0-2;
    Note [Low-precision tensors], runtime/reference/layers/common.py)."""
    table = torch.tensor(FP4_VALUES, device=values.device)
    index = (values.abs().unsqueeze(-1) == table).to(torch.uint8).argmax(-1).to(torch.uint8)
    return (index | torch.signbit(values).to(torch.uint8) * 8).view(torch.float4_e2m1fn_x2)


def _block_overload(x, block_size, amax, num_bits, exponent_bits, scale_num_bits,
                    scale_exponent_bits):
    return fake_block_quantize(x, block_size, None, num_bits, exponent_bits, scale_num_bits,
                               scale_exponent_bits)


def _fake(x, *args):
    return torch.empty_like(x)


def register() -> str:
    """Define the ops unless they exist (ModelOpt imported first defines them, and its
    kernels then serve them); returns who defined them: 'modelopt' or 'ours'."""
    if hasattr(torch.ops.tensorrt, "quantize_op"):
        return "modelopt"
    kernels = {"quantize_op": fake_quantize, "dynamic_block_quantize_op": fake_block_quantize,
               "dynamic_block_quantize_op.overload": _block_overload}
    for name, schema in SCHEMAS.items():
        torch.library.define(f"tensorrt::{name}", schema)
        torch.library.impl(f"tensorrt::{name}", ["cpu", "cuda"])(kernels[name])
        torch.library.register_fake(f"tensorrt::{name}")(_fake)
    return "ours"


OWNER = register()
quantize_op = torch.ops.tensorrt.quantize_op.default
dynamic_block_quantize_op = torch.ops.tensorrt.dynamic_block_quantize_op.default
QUANTIZE_OPS = (quantize_op, dynamic_block_quantize_op,
                torch.ops.tensorrt.dynamic_block_quantize_op.overload)
