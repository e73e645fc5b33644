"""Reference QUANTIZE, DEQUANTIZE and DYNAMIC_QUANTIZE and TensorRT's low-precision types
(FP8 E4M3, FP4 E2M1, INT4, E8M0) against values worked out by hand from TensorRT's
documented quantization formulas (nvinfer1::IQuantizeLayer: clamp(round(x / scale)),
round half to even, FP8 [-448, 448], INT4 [-8, 7]; "Quantization Schemes") and the E2M1 /
E4M3 / E8M0 encodings. Networks built through TensorRT's API check that each output's
dtype and shape is the one TensorRT infers (the executor's strict _check)."""

import pytest
import torch

from torch_trt_ref._trt import make_logger, trt
from torch_trt_ref.runtime.reference.executor import (
    ReferenceMismatchError,
    run_snapshot,
)
from torch_trt_ref.runtime.reference.layers.quantize_ops import (
    Int4Tensor,
    RejectedByTensorRT,
    narrow,
    represent,
    widen,
)
from torch_trt_ref.runtime.snapshot import LayerRecord, NetworkSnapshot, TensorInfo, take_snapshot

from .conftest import f32, run

NAN, INF = float("nan"), float("inf")
PERM8 = (0, 1, 2, 3, 4, 5, 6, 7)


def values_of(x):
    """Real values as float64 lists (NaN kept), for exact comparison."""
    return widen(x).double().tolist()


def same(actual, expected):
    """Exact equality of value lists, NaN equal to NaN, -0.0 equal to 0.0."""
    a, e = torch.tensor(actual, dtype=torch.float64), torch.tensor(expected, dtype=torch.float64)
    return a.shape == e.shape and bool(((a == e) | (a.isnan() & e.isnan())).all())


# -- the types: rounding and saturation ------------------------------------------------------

def test_fp4_rounds_to_nearest_even_and_saturates_at_6():
    # E2M1 magnitudes 0, .5, 1, 1.5, 2, 3, 4, 6. 0.3 is nearer 0.5 than 0; the midpoints
    # 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5 go to the neighbour with the even code
    # (0, 1, 1, 2, 2, 4, 4); 5.1 -> 6; 7 and 100 saturate to 6.
    x = f32([0.3, 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 5.1, 7.0, 100.0, -0.3, -2.9, -INF])
    q = narrow(x, "FP4")
    assert q.dtype == torch.float4_e2m1fn_x2 and q.shape == x.shape
    assert values_of(q) == [0.5, 0.0, 1.0, 1.0, 2.0, 2.0, 4.0, 4.0, 6.0, 6.0, 6.0,
                            -0.5, -3.0, -6.0]


def test_fp4_is_one_e2m1_code_per_byte():
    # code = sign(1) exponent(2) mantissa(1): 0.5 = 0.001, 6 = 0.111, -6 = 1.111, -1 = 1.010
    q = narrow(f32([0.5, 6.0, -6.0, -1.0]), "FP4")
    assert q.view(torch.uint8).tolist() == [0b0001, 0b0111, 0b1111, 0b1010]


def test_fp4_nan_becomes_6():  # Note [FP4 NaN]
    assert values_of(narrow(f32([NAN]), "FP4")) == [6.0]


def test_fp8_saturates_at_448_rounds_to_nearest_even_keeps_nan():
    # E4M3: 16 = 1.000b * 2^4, spacing 2 between 16 and 32: 17 ties between 16 (mantissa
    # 000) and 18 (001) -> 16; 19 ties between 18 and 20 (010) -> 20. 500, 1e6, inf -> 448.
    q = narrow(f32([500.0, -500.0, 1e6, INF, 17.0, 19.0, 0.3, NAN]), "FP8")
    assert q.dtype == torch.float8_e4m3fn
    assert same(values_of(q), [448.0, -448.0, 448.0, 448.0, 16.0, 20.0, 0.3125, NAN])


def test_int4_rounds_half_to_even_and_saturates():
    # round(-8.6) = -9 -> -8; 7.5 -> 8 -> 7; 6.5 -> 6; 2.5 -> 2; -2.5 -> -2; 0.4 -> 0.
    q = narrow(f32([-8.6, 7.5, 6.5, 2.5, -2.5, 0.4, 100.0]), "INT4")
    assert q.dtype == torch.int4 and isinstance(q, Int4Tensor)
    assert values_of(q) == [-8, 7, 6, 2, -2, 0, 7]


def test_int8_rounds_half_to_even_and_saturates():
    assert values_of(narrow(f32([2.5, -2.5, 3.5, 200.0, -200.0]), "INT8")) == \
        [2, -2, 4, 127, -128]


def test_e8m0_rounds_up_to_a_power_of_two():  # Note [E8M0 rounding]
    # 0.3 -> 0.5 (not 0.25); 3 -> 4; powers of two stay; 0 and negatives -> 2^-127.
    q = narrow(f32([0.3, 3.0, 0.25, 1.0, 0.0, -1.0, NAN]), "E8M0")
    assert q.dtype == torch.float8_e8m0fnu
    assert same(values_of(q), [0.5, 4.0, 0.25, 1.0, 2.0 ** -127, 2.0 ** -127, NAN])


def test_int4_tensors_move_like_other_tensors():
    # TensorRT lets SHUFFLE / CONCATENATION move INT4 tensors (quantized weights).
    q = narrow(f32([[1, 2, 3], [4, 5, 6]]), "INT4")
    out = run("SHUFFLE", [q], first_transpose=(1, 0) + PERM8[2:], reshape_dims=(6,),
              second_transpose=PERM8, zero_is_placeholder=False)[0]
    assert out.dtype == torch.int4 and values_of(out) == [1, 4, 2, 5, 3, 6]
    both = run("CONCATENATION", [q, q], axis=0)[0]
    assert both.dtype == torch.int4 and values_of(both)[2] == [1, 2, 3]


def test_represent_feeds_inputs_in_the_executors_representation():
    x = f32([1.0, -3.0, 0.3])
    assert values_of(represent(x, torch.int4)) == [1, -3, 0]
    assert values_of(represent(x, torch.float4_e2m1fn_x2)) == [1.0, -3.0, 0.5]
    assert values_of(represent(x, torch.float8_e4m3fn)) == [1.0, -3.0, 0.3125]
    assert represent(x, torch.int32).tolist() == [1, -3, 0]


@pytest.mark.parametrize("dtype", ["FP8", "FP4", "INT4", "E8M0"])
def test_cast_from_or_to_a_low_precision_type_is_rejected(dtype):
    # Note [Low-precision cast]: TensorRT's builder rejects such networks.
    with pytest.raises(RejectedByTensorRT, match="rejects a CAST"):
        run("CAST", [f32([1.0])], to_type=dtype)
    with pytest.raises(RejectedByTensorRT, match="rejects a CAST"):
        run("CAST", [narrow(f32([1.0]), dtype)], to_type="FLOAT")


# -- QUANTIZE ----------------------------------------------------------------------------------

def test_quantize_int8_per_tensor():
    # x / 2 = 0, 1.25, -1.75, 64, -100 -> round half even 0, 1, -2, 64, -100; 300/2 -> 127
    (q,) = run("QUANTIZE", [f32([0.0, 2.5, -3.5, 128.0, -200.0, 300.0]), f32(2.0)],
               axis=0, to_type="INT8")
    assert q.dtype == torch.int8 and q.tolist() == [0, 1, -2, 64, -100, 127]


def test_quantize_int8_per_channel_along_axis():
    x = f32([[1.0, 4.0], [1.0, 4.0]])
    (q,) = run("QUANTIZE", [x, f32([1.0, 4.0]), None], axis=1, to_type="INT8")
    assert q.tolist() == [[1, 1], [1, 1]]  # column 0 / 1, column 1 / 4
    (q,) = run("QUANTIZE", [x, f32([1.0, 0.5])], axis=0, to_type="INT8")
    assert q.tolist() == [[1, 4], [2, 8]]  # row 0 / 1, row 1 / 0.5


def test_quantize_int4_per_block():
    # scale (2, 2) for a (2, 4) input: blocks of 2 along the last dim.
    x = f32([[1.0, 3.0, 10.0, -30.0], [2.0, 5.0, 0.5, 1.5]])
    scale = f32([[1.0, 5.0], [2.0, 0.5]])
    (q,) = run("QUANTIZE", [x, scale], axis=1, to_type="INT4")
    # row 0: 1, 3 | 2, -6;  row 1: 1, 2.5 -> 2 | 1, 3
    assert q.dtype == torch.int4 and values_of(q) == [[1, 3, 2, -6], [1, 2, 1, 3]]


def test_quantize_fp8_saturates():
    # ONNX QuantizeLinear e4m3fn values: 1e5 / 2 -> 448; 200 / 2 = 100 -> 96 (spacing 8)
    (q,) = run("QUANTIZE", [f32([0.0, 1.0, 2.0, 1e5, 200.0]), f32(2.0)], axis=0, to_type="FP8")
    assert q.dtype == torch.float8_e4m3fn
    assert values_of(q) == [0.0, 0.5, 1.0, 448.0, 96.0]


def test_quantize_fp4_per_channel():
    # ONNX QuantizeLinear float4e2m1: row scales 2, 3, 4
    x = f32([[0.0, 2.5, 4.8, 8.6], [-30.0, -20.0, 6.0, 9.0], [-0.0, -2.5, -4.8, -8.6]])
    (q,) = run("QUANTIZE", [x, f32([2.0, 3.0, 4.0])], axis=0, to_type="FP4")
    # 1.25 -> 1, 2.4 -> 2, 4.3 -> 4 | -10 -> -6, -6.67 -> -6, 2, 3 | -0.625 -> -0.5, -1.2 -> -1
    assert values_of(q) == [[0.0, 1.0, 2.0, 4.0], [-6.0, -6.0, 2.0, 3.0],
                            [0.0, -0.5, -1.0, -2.0]]


def test_quantize_rejects_a_nonzero_zero_point():
    with pytest.raises(RejectedByTensorRT, match="symmetric"):
        run("QUANTIZE", [f32([1.0]), f32(1.0), torch.tensor([3], dtype=torch.int8)],
            axis=0, to_type="INT8")
    (q,) = run("QUANTIZE", [f32([1.0]), f32(1.0), torch.tensor([0], dtype=torch.int8)],
               axis=0, to_type="INT8")
    assert q.tolist() == [1]


# -- DEQUANTIZE --------------------------------------------------------------------------------

def test_dequantize_fp8_to_float_and_half():
    # FP8 codes (sign.exponent.mantissa, bias 7): 0x38 = 0.0111.000 = 1; 0x7E = 0.1111.110
    # = 1.75 * 2^8 = 448; 0xED = 1.1101.101 = -1.625 * 2^6 = -104 (ONNX's e4m3fn case)
    q = torch.tensor([0x00, 0x38, 0x7E, 0xED], dtype=torch.uint8).view(torch.float8_e4m3fn)
    (out,) = run("DEQUANTIZE", [q, f32(2.0)], axis=0, to_type="FLOAT")
    assert out.dtype == torch.float32 and out.tolist() == [0.0, 2.0, 896.0, -208.0]
    (out,) = run("DEQUANTIZE", [q, torch.tensor(2.0, dtype=torch.float16)], axis=0,
                 to_type="HALF")
    assert out.dtype == torch.float16 and out.tolist() == [0.0, 2.0, 896.0, -208.0]


def test_dequantize_int4_per_block_and_int8_per_channel():
    q = narrow(f32([[1, -2, 7, -8]]), "INT4")
    (out,) = run("DEQUANTIZE", [q, f32([[0.5, 3.0]])], axis=1, to_type="FLOAT")
    assert out.tolist() == [[0.5, -1.0, 21.0, -24.0]]
    q8 = torch.tensor([[1, 2], [3, 4]], dtype=torch.int8)
    (out,) = run("DEQUANTIZE", [q8, f32([10.0, 100.0])], axis=1, to_type="FLOAT")
    assert out.tolist() == [[10.0, 200.0], [30.0, 400.0]]


def test_dequantize_fp4_with_fp8_block_scales_dequantized_first():
    # NVFP4 double quantization as Torch-TensorRT builds it: DQ(FP8 block scales, global
    # scale) -> float block scales; DQ(FP4 data, those scales).
    block_scales = narrow(f32([[2.5], [4.0]]), "FP8")
    (scales,) = run("DEQUANTIZE", [block_scales, f32(0.5)], axis=1, to_type="FLOAT")
    assert scales.tolist() == [[1.25], [2.0]]
    data = narrow(f32([[1.0, -6.0], [0.5, 3.0]]), "FP4")
    (out,) = run("DEQUANTIZE", [data, scales], axis=1, to_type="FLOAT")
    assert out.tolist() == [[1.25, -7.5], [1.0, 6.0]]


# -- DYNAMIC_QUANTIZE ------------------------------------------------------------------------

def nvfp4(x, global_scale, block_shape=None):
    return run("DYNAMIC_QUANTIZE", [x, f32(global_scale)], axis=1, block_size=16,
               block_shape=block_shape, to_type="FP4", scale_type="FP8")


def test_dynamic_quantize_nvfp4_scale_is_amax_over_6_over_global_in_fp8():
    # Note [Dynamic quantization scale]. Row 0: amax 12 -> 12 / 6 / 1 = 2 (exact in FP8);
    # data x / 2. Row 1: amax 15.6 -> 2.6 -> FP8 2.5 (neighbours 2.5, 2.75); data x / 2.5.
    row0 = [12.0, -12.0, 1.0, 0.5] + [0.0] * 12
    row1 = [15.6, 5.0, -2.0, 0.6] + [0.0] * 12
    data, scale = nvfp4(f32([row0, row1]), 1.0)
    assert data.dtype == torch.float4_e2m1fn_x2 and scale.dtype == torch.float8_e4m3fn
    assert scale.shape == (2, 1) and values_of(scale) == [[2.0], [2.5]]
    # row 0: 6, -6, 0.5, 0.25 -> 0;  row 1: 6.24 -> 6, 2, -0.8 -> -1, 0.24 -> 0
    assert values_of(data)[0][:4] == [6.0, -6.0, 0.5, 0.0]
    assert values_of(data)[1][:4] == [6.0, 2.0, -1.0, 0.0]


def test_dynamic_quantize_nvfp4_divides_by_the_global_scale():
    # amax 12, global 0.5: scale 12 / 6 / 0.5 = 4; data x / (4 * 0.5) = x / 2.
    data, scale = nvfp4(f32([[12.0, 3.0] + [0.0] * 14]), 0.5)
    assert values_of(scale) == [[4.0]] and values_of(data)[0][:2] == [6.0, 1.5]


def test_dynamic_quantize_zero_block_gives_zero_scale_and_data():
    data, scale = nvfp4(f32([[0.0] * 16]), 1.0)
    assert values_of(scale) == [[0.0]] and values_of(data) == [[0.0] * 16]


def test_dynamic_quantize_block_shape_minus_one_is_the_whole_dim():
    data, scale = nvfp4(f32([[6.0] + [0.0] * 15, [3.0] + [0.0] * 15]), 1.0, (1, -1))
    assert values_of(scale) == [[1.0], [0.5]] and values_of(data)[1][0] == 6.0


def test_dynamic_quantize_mxfp8_scale_rounds_up_to_a_power_of_two():
    # amax 100: 100 / 448 = 0.223 -> E8M0 0.25; data 4x: 400 -> FP8 384 (tie between 384
    # = 1.100b * 2^8 and 416 = 1.101b * 2^8 goes to the even mantissa), 1 -> 4.
    x = f32([[100.0, 1.0] + [0.0] * 30])
    data, scale = run("DYNAMIC_QUANTIZE", [x], axis=1, block_size=32, block_shape=None,
                      to_type="FP8", scale_type="E8M0")
    assert scale.dtype == torch.float8_e8m0fnu and values_of(scale) == [[0.25]]
    assert data.dtype == torch.float8_e4m3fn and values_of(data)[0][:2] == [384.0, 4.0]


# -- networks built through TensorRT: inferred dtypes and shapes --------------------------------

def build_and_run(make, **inputs):
    builder = trt.Builder(make_logger())
    net = builder.create_network(0)
    tensors = {name: net.add_input(name, trt.float32, tuple(value.shape))
               for name, value in inputs.items()}
    keep = make(net, tensors)  # noqa: F841  (numpy weights must outlive the snapshot)
    snapshot = take_snapshot(net, {})
    return run_snapshot(snapshot, inputs), snapshot


def constant(net, values):
    array = values.numpy()
    return net.add_constant(tuple(array.shape), trt.Weights(array)).get_output(0), array


def test_network_int4_quantize_shuffle_dequantize():
    # Q to INT4 with (2, 2) block scales, transpose the INT4 tensor, DQ with the transposed
    # scales: TensorRT's builder accepts this network (measured) and infers INT4 in between.
    x = f32([[1.0, 3.0, 10.0, -30.0], [2.0, 5.0, 0.5, 1.5]])

    def make(net, t):
        scale, a = constant(net, f32([[1.0, 5.0], [2.0, 0.5]]))
        q = net.add_quantize(t["x"], scale, trt.DataType.INT4)
        q.axis = 1
        shuffle = net.add_shuffle(q.get_output(0))
        shuffle.first_transpose = (1, 0)
        scale_t, b = constant(net, f32([[1.0, 2.0], [5.0, 0.5]]))
        dq = net.add_dequantize(shuffle.get_output(0), scale_t, trt.float32)
        dq.axis = 0
        net.mark_output(dq.get_output(0))
        return a, b

    (out,), snapshot = build_and_run(make, x=x)
    kinds = {layer.kind: layer.outputs[0].dtype for layer in snapshot.layers}
    assert kinds["QUANTIZE"] == kinds["SHUFFLE"] == torch.int4
    # q = [[1, 3, 2, -6], [1, 2, 1, 3]] (test_quantize_int4_per_block), transposed, times
    # the scales: [[1, 2], [3, 5], [10, 2], [-30, 1.5]]
    assert out.tolist() == [[1.0, 2.0], [3.0, 4.0], [10.0, 0.5], [-30.0, 1.5]]


def test_network_nvfp4_dynamic_quantize_double_dequantize():
    # Torch-TensorRT's NVFP4 activation path: DYNAMIC_QUANTIZE (FP4 data, FP8 scales, global
    # scale input 1) -> DQ(scales, global) -> DQ(data, scales).
    x = f32([[12.0, -12.0, 1.0, 0.5] + [0.0] * 12, [15.6, 5.0, -2.0, 0.6] + [0.0] * 12])

    def make(net, t):
        global_scale, a = constant(net, f32(1.0))
        dyn = net.add_dynamic_quantize(t["x"], 1, 16, trt.DataType.FP4, trt.DataType.FP8)
        dyn.set_input(1, global_scale)
        scales = net.add_dequantize(dyn.get_output(1), global_scale, trt.float32)
        scales.axis = 1
        dq = net.add_dequantize(dyn.get_output(0), scales.get_output(0), trt.float32)
        dq.axis = 1
        net.mark_output(dq.get_output(0))
        return a

    (out,), snapshot = build_and_run(make, x=x)
    dyn = next(layer for layer in snapshot.layers if layer.kind == "DYNAMIC_QUANTIZE")
    assert [o.dtype for o in dyn.outputs] == [torch.float4_e2m1fn_x2, torch.float8_e4m3fn]
    assert dyn.outputs[1].shape == (2, 1)
    # data * scale: row 0 (scale 2): 12, -12, 1, 0; row 1 (scale 2.5): 15, 5, -2.5, 0
    assert out[:, :4].tolist() == [[12.0, -12.0, 1.0, 0.0], [15.0, 5.0, -2.5, 0.0]]


# -- the executor's dtype check ------------------------------------------------------------------

def one_layer_snapshot(kind, attrs, out_dtype):
    x = TensorInfo("x", (2,), torch.float32)
    s = TensorInfo("s", (), torch.float32)
    layer = LayerRecord("q", kind, ["x", "s"], [TensorInfo("y", (2,), out_dtype)], attrs)
    return NetworkSnapshot([x, s], ["y"], [layer])


def test_check_is_strict_about_low_precision_dtypes():
    snapshot = one_layer_snapshot("QUANTIZE", {"axis": 0, "to_type": "FP8"},
                                  torch.float4_e2m1fn_x2)
    with pytest.raises(ReferenceMismatchError, match="float8_e4m3fn"):
        run_snapshot(snapshot, {"x": f32([1.0, 2.0]), "s": f32(1.0)})


def test_check_names_a_tensorrt_type_without_representation():
    snapshot = one_layer_snapshot("QUANTIZE", {"axis": 0, "to_type": "FP8"}, "FP6")
    with pytest.raises(NotImplementedError, match="TensorRT type FP6"):
        run_snapshot(snapshot, {"x": f32([1.0, 2.0]), "s": f32(1.0)})
