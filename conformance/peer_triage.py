"""Triage of the cells that fail through Torch-TensorRT (``python -m conformance --backend
torch_tensorrt``, DESIGN D16), as data: each ``Rule`` matches cell ids (``fnmatch``) and,
when given, a text in the failure message, and names a class with its evidence. Classes:
``peer_bug`` (a Torch-TensorRT converter or lowering pass builds a network that computes
something else, or cannot build one for a graph its support check accepted; a repro for a
GPU is in conformance/peer_repros/ where one is written), ``executor`` (our reference executor
read a layer wrongly: fixed in torch_trt_ref/runtime/reference/ with a test; such a cell
passes afterwards, so no rule is needed for it), ``deviation`` (accepted: neither side's
bug, e.g. an artifact of running the peer without a GPU). Evidence names an oracle we did not
write where one exists. The first matching rule decides; a failure no rule matches is
"unclassified"."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

PEER_BUG, EXECUTOR, DEVIATION = "peer_bug", "executor", "deviation"
CLASSES = (PEER_BUG, EXECUTOR, DEVIATION)


@dataclass(frozen=True)
class Rule:
    cells: str  # fnmatch pattern over cell ids
    cls: str
    evidence: str
    message: str = ""  # a text the failure message must contain ("" = any)


_SHAPE = ("the output's shape or dtype differs from eager's. Our executor checks every layer's "
          "output against the shape and dtype TensorRT itself inferred for the peer's network "
          "(a difference raises ReferenceMismatchError), so the network as TensorRT reads it "
          "has this shape: the oracle is torch's eager result and TensorRT's shape inference")
_INVALID = ("TensorRT's own API rejects a layer the peer's converter added (its error is in "
            "the log, e.g. REDUCE on a 0-d input: 'at least 1 dimensions are required'), so "
            "TensorRT cannot infer the layer's output shape: the network is invalid, whatever "
            "any executor does; the peer's support check had accepted the graph")
_RAISES = ("the peer's support check accepts the node (no capability validator rejects it), "
           "then its converter raises while building the network: on a GPU the compile fails "
           "the same way (the converter code is the same); the message is the peer's own")

_TRUNC_MEAN = (
    "the peer's scatter_reduce decomposition (lowering/_decompositions.py, "
    "scatter_reduce_decomposition) divides the sum by the count with torch.div(..., "
    "rounding_mode='trunc') for every dtype; torch's scatter_reduce mean of a float tensor "
    "is a true division (eager has fractions), so the network (FLOOR_DIV with SIGN/ABS: "
    "aten.div.Tensor_mode) truncates each mean. Repro: "
    "conformance/peer_repros/scatter_reduce_mean.py")

_BAG_END = (
    "the peer's embedding_bag converter (impl/embedding.py, "
    "embedding_bag_with_ITensor_offsets) sets the outer loop's next bag end to "
    "gather(offsets, i + 1) in every iteration, so the last iteration gathers offsets at "
    "index len(offsets) (offsets with the total length appended): out of range, where "
    "TensorRT's Gather operator page says every index must obey 0 <= I < "
    "input_dimensions[axis]; on a GPU that is a read past the buffer (undefined). The "
    "value is never used: with that one read clamped, sum, mean, max and "
    "include_last_offset cells match eager float64. Repro: "
    "conformance/peer_repros/embedding_bag.py")
_INT_DIV = (
    "true division of integers is float in torch (torch.div with rounding_mode=None "
    "'performs a true division', int inputs promote to the default float dtype); the "
    "peer's network divides in the integer type and casts, so 1/2 comes back 0 (max "
    "abs error 0.5 for div.Scalar by 2, 0.667 for div.Tensor). Repro: "
    "conformance/peer_repros/int_true_div.py")
_SCALES = (
    "the peer's upsample converter (impl/upsample.py) puts the scale factors on the "
    "IResizeLayer (layer.scales); with scales TensorRT maps output index x to x / scale "
    "(ALIGN_CORNERS: x * (n - 1) / (n * scale - 1)), as ONNX's Resize does (our executor's "
    "reading, Note [Resize coordinates], passes the 26 ONNX resize/upsample node cases), "
    "while torch's .vec overloads map by the floored output size (eager: 5 -> 5 rows at "
    "scale 1.1 is the identity, the network repeats row 0). A converter wanting torch's "
    "result sets the output shape instead. Repros: conformance/peer_repros/upsample_scales.py "
    "(nearest) and conformance/peer_repros/upsample_bilinear_align_corners.py")
_FIXED_WINDOW = (
    "adaptive average pooling averages window i over [floor(i*in/out), ceil((i+1)*in/"
    "out)) (torch's definition; the windows differ in size when out does not divide in); "
    "the peer's adaptive_avg_poolNd (impl/pool.py) uses one POOLING AVERAGE with stride in "
    "// out and window in - (out-1)*stride, e.g. (2, 3, 3) with stride (2, 1, 1) for "
    "4x5x6 -> 2x3x4, and window 4 stride 1 for 7 -> 4 (after repeating rows where out > "
    "in): it averages other elements. Repro: conformance/peer_repros/adaptive_avg_pool.py")

TRIAGE: list[Rule] = [
    Rule("aten.add.Scalar-s0-*", PEER_BUG,
         "aten_ops_add reads alpha from kwargs only; add.Scalar's schema `add.Scalar(Tensor "
         "self, Scalar other, Scalar alpha=1)` makes alpha positional, so the exported node "
         "holds it in args and the network (CONSTANT 2, ELEMENTWISE SUM) computes x + 2 for "
         "x + 3*2. The peer's own GPU tests (tests/py/dynamo/conversion/test_add_aten.py) pass "
         "alpha only to aten.add.Tensor, where it is keyword-only, so they do not see it. "
         "Repro: conformance/peer_repros/add_scalar_alpha.py"),
    Rule("*where*-bf16-*", PEER_BUG,
         "promote_trt_tensors_to_same_dtype (converter_utils.py) counts only float16/float32 "
         "as floats, so bf16 branches of where are cast to INT32 before the SELECT (the "
         "network holds CAST BF16->INT32 ... CAST INT32->BF16): fractions are lost. "
         "Repro: conformance/peer_repros/where_bf16.py"),
    Rule("opinfo:tril-bf16-*", PEER_BUG,
         "tril lowers to where (the network: CONSTANT mask, CAST BF16->INT32, SELECT, CAST "
         "INT32->BF16), the bf16 where bug above. Repro: conformance/peer_repros/where_bf16.py"),
    Rule("opinfo:nn.functional.hardshrink-bf16-*", PEER_BUG,
         "hardshrink lowers to le/abs and where; the network casts the bf16 branches to "
         "INT32 before the SELECT (CAST BF16->INT32 ... CAST INT32->BF16), the bf16 where "
         "bug. Repro: conformance/peer_repros/where_bf16.py"),
    Rule("aten.clamp.default-int_float_bound-*", PEER_BUG,
         "clamp of an int tensor with a float bound is float in torch (torch.result_type "
         "promotes; eager returns float32); the peer's network makes the bound an INT32 "
         "constant, takes the MAX in INT32 and casts to FLOAT, so a bound of x.5 is off by "
         "0.5 (the same promotion bug as add_scalar_int_float.py). Repro: "
         "conformance/peer_repros/clamp_int_float.py"),
    *(Rule(cells, PEER_BUG, _TRUNC_MEAN) for cells in (
        "aten.scatter_reduce.two-mean*-fp*", "aten.scatter_reduce.two-mean*-bf16-*",
        "opinfo:scatter_reduce.mean-fp*", "opinfo:scatter_reduce.mean-bf16-*")),
    Rule("aten.add.Scalar-int_plus_float-*", PEER_BUG,
         "int tensor + 0.5: torch promotes to float (torch.result_type(int32 tensor, 0.5) is "
         "float32); the peer's network makes the scalar an INT32 constant, adds in INT32 and "
         "casts the sum to FLOAT, so every element is off by 0.5. "
         "Repro: conformance/peer_repros/add_scalar_int_float.py"),
    Rule("aten.elu.default-input_scale-*", PEER_BUG,
         "elu(x, alpha=2, scale=1.5, input_scale=0.5) = scale * (x if x > 0 else alpha * "
         "(exp(x * input_scale) - 1)) (torch.nn.functional.elu's definition); the peer's "
         "network is one ACTIVATION ELU with alpha 2: scale and input_scale are dropped. "
         "Repro: conformance/peer_repros/elu_scale.py"),
    Rule("aten.convolution.default-transposed*", PEER_BUG,
         "TensorRT's API rejects the deconvolution's stride/padding/dilation the peer sets "
         "(IDeconvolutionLayer::setStrideNd: 'stride.nbDims == 2 || 3' fails: a 1-element "
         "list is passed for a 2-D or 3-D transposed convolution), so the layer keeps "
         "stride 1 and the output shape (TensorRT's own inference) differs from eager's",
         message=" shape ("),
    Rule("aten._adaptive_avg_pool*d.default-mixed-*", PEER_BUG, _FIXED_WINDOW),
    Rule("aten._adaptive_avg_pool*d.default-*", PEER_BUG, _FIXED_WINDOW,
         message="RMSE vs float64"),
    Rule("*embedding_bag*padding_idx*", PEER_BUG,
         "two bugs: " + _BAG_END + ". And padding_idx is dropped: the peer's converter "
         "passes no padding_idx (impl/embedding.py: 'ignore padding_idx') while its "
         "validator accepts the node, so bags count the padding rows (with the read "
         "clamped, RMSE 0.69 vs float64)", message="gather index out of range"),
    Rule("*embedding_bag*", PEER_BUG, _BAG_END, message="gather index out of range"),
    Rule("opinfo:nn.functional.soft_margin_loss-*", PEER_BUG,
         "soft_margin_loss is log1p(exp(-y*x)) (torch's decomposition); the peer's log1p "
         "converter (impl/unary/ops.py) computes LOG(1 + x) in the input's float type, so "
         "for x = exp(-15) ~ 3.06e-7 the sum 1 + x rounds in float32 and the network returns "
         "3.58e-7 (17% high) where eager bf16 gives 3.05e-7 and float64 3.04e-7. "
         "Repro: conformance/peer_repros/log1p_small.py", message="RMSE vs float64"),
    Rule("aten._native_batch_norm_legit.no_stats-*", PEER_BUG,
         "_native_batch_norm_legit.no_stats normalizes with the batch's own mean and "
         "variance (it has no running statistics: training-mode batch norm); the peer's "
         "converter (aten_ops_batch_norm_legit_no_stats) calls batch_norm with "
         "training=False and no running_mean/running_var, which batch_norm fills with 0 and "
         "1 (impl/normalization/ops.py), so the network only scales and shifts x. Repro: "
         "conformance/peer_repros/batch_norm_no_stats.py"),
    Rule("aten.addmm.default-beta0_ignores_nan-*", PEER_BUG,
         "torch.addmm's documentation: 'If beta is 0, then input will be ignored, and nan "
         "and inf in it will not be propagated'; the peer's network multiplies the NaN "
         "input by 0 and adds it, so every element is NaN. Repro: "
         "conformance/peer_repros/addmm_beta0_nan.py"),
    Rule("aten.atan2.default-axes-*", PEER_BUG,
         "atan2(0, x) for x < 0 is +pi for y = +0 and -pi for y = -0 (C99 / IEEE 754, "
         "torch.atan2); the peer's composite atan2 (no TensorRT atan2 layer) returns the "
         "other sign there: max abs error 6.28 = 2*pi at those elements only. Repro: "
         "conformance/peer_repros/atan2_signed_zero.py"),
    *(Rule(cells, PEER_BUG, _INT_DIV, message="RMSE vs float64")
      for cells in ("aten.div.Scalar-*-int*", "aten.div.Tensor-*-int*")),
    Rule("operator.truediv-*-dynamic", PEER_BUG,
         "Python's truediv of two sizes is a float; the peer's converter for operator."
         "truediv on the dynamic sizes divides them as integers (the same integer division "
         "as div of int tensors): at size 1, 1/4 comes back 0, at size 5 1; eager's value is "
         "exact (RMSE 0). Repro: conformance/peer_repros/size_true_div.py",
         message="RMSE vs float64"),
    Rule("aten.ge.Scalar-int_vs_float-*", PEER_BUG,
         "int tensor >= 0.5 compares in float in torch (torch.result_type promotes); the "
         "peer's network makes the scalar an int constant, so 0 >= 0.5 comes back true (the "
         "same promotion bug as add_scalar_int_float.py). Repro: "
         "conformance/peer_repros/ge_int_vs_float.py"),
    Rule("aten.softplus.default-beta_threshold-*", PEER_BUG,
         "softplus(x, beta, threshold) is x where beta*x > threshold (torch.nn.functional."
         "softplus); the peer's converter (impl/activation/ops.py softplus) takes beta only "
         "and builds one ACTIVATION SOFTPLUS, so the threshold is dropped and the values "
         "above it are log(1 + exp(beta*x))/beta instead of x. Repro: "
         "conformance/peer_repros/softplus_threshold.py"),
    Rule("aten.index.Tensor-split-*-dynamic", PEER_BUG,
         "index with two index tensors (x[i, :, j]) on a dynamic input: the peer's converter "
         "flattens (i, j) to one linear index i*size + j and gathers, without wrapping a "
         "negative j (eager's -1 is the last element), so it reads an element of the "
         "previous row: at the three shapes the wrong values are exactly the positions "
         "whose j is negative (j = -2, -2 and -1 here). Not a dynamic-shape bug: the static "
         "cell's sample has no negative j (j = [3, 2]); with one a static input reads the "
         "same wrong row. Repro: conformance/peer_repros/index_negative.py",
         message="RMSE vs float64"),
    *(Rule(cells, PEER_BUG, _SCALES, message="RMSE vs float64") for cells in (
        "aten.upsample_nearest*d.vec-*", "aten.upsample_*linear*d.vec-*align_corners*")),
    Rule("aten._log_softmax.default-large-fp16-*", PEER_BUG,
         "log_softmax of inputs 50 apart in fp16: eager returns -27.2 (x - max - log sum "
         "exp(x - max)); the peer's network returns -inf there: it takes the log of a "
         "softmax that underflowed to 0 in fp16 instead of subtracting the log-sum-exp. Repro: "
         "conformance/peer_repros/log_softmax_fp16.py",
         message="NaN or an infinity"),
    Rule("aten._softmax.default-half_to_float-*", DEVIATION,
         "eager itself cannot run the cell in the peer's environment: torch 2.13's CPU "
         "kernel raises 'softmax with half to float conversion is not supported on CPU' "
         "(our suite runs it on torch 2.14), so there is no eager result to judge by; an "
         "artifact of the CPU run with torch 2.13", message="not supported on CPU"),
    Rule("aten.var_mean.correction-*-dynamic", PEER_BUG,
         "var_mean over a dynamic dim: the peer's lowered graph divides the sums by "
         "CONSTANT element counts (its /div_rhs and /div_1_rhs layers) taken at the compile "
         "shape (2, 3, 4); at the min shape (1, 3, 4) the count is half, so mean and var "
         "are off (error 0.76 / 0.30), at the opt shape they match (2e-7). The counts come "
         "from the peer's var decomposition (lowering/_decompositions.py, var_decomposition: "
         "float(N - 1) of the symbolic sizes). Repro: "
         "conformance/peer_repros/var_mean_dynamic.py",
         message="RMSE vs float64"),
    Rule("aten.resize.default-*-dynamic", PEER_BUG,
         "resize to a size with a dynamic dim: the peer's support check accepts the node "
         "(aten.resize_ is in its converter table), then its compile raises torch's "
         "'isIntList() INTERNAL ASSERT FAILED ... Expected IntList but got GenericList' "
         "(the size list holds a symbolic int); static cells pass. Repro: "
         "conformance/peer_repros/resize_dynamic.py",
         message="Expected IntList but got GenericList"),
    Rule("aten.roll.default-two_dims-*", PEER_BUG,
         "roll(x, [-5, 2], [0, -1]) on 3x4: the peer's network is one SLICE in WRAP mode "
         "with start (3, 2); roll by -5 on 3 rows needs start 5 mod 3 = 2 (out[i] = x[(i + "
         "5) mod 3]), and start 3 wraps to 0, the identity: eager's rows are x[2], x[0], "
         "x[1], the network returns x unrolled along dim 0 (a shift larger than the dim is "
         "not reduced modulo its size). Repro: conformance/peer_repros/roll_large_shift.py",
         message="RMSE vs float64"),
    Rule("aten.slice.Tensor-*-dynamic", PEER_BUG,
         "x[1:-1] (and the symbolic slice) on a dynamic dim whose range reaches 1: eager "
         "returns an empty tensor there; the peer's network computes the slice size as "
         "end - start without clamping at 0, so at the min shape the SLICE gets size -1, a "
         "negative output dim, which TensorRT cannot have (our executor fails on it with "
         "torch.arange's message). Repro: conformance/peer_repros/slice_dynamic_empty.py",
         message="inconsistent with step sign"),
    *(Rule(f"opinfo:{op}-bf16-*", PEER_BUG,
           f"{op} lowers to where; the peer's network casts the bf16 values to INT32 before "
           "the SELECT (CAST BF16->INT32, SELECT, CAST ->BF16; seen in the networks of "
           "masked_fill, nan_to_num and this nll_loss sample): masked_fill([1.25, x, -4.5], "
           "m, 0.5) gives [1, 0, -4] and nan_to_num [1, 0, -4], the bf16 where bug. "
           "Repro: conformance/peer_repros/where_bf16.py")
      for op in ("masked_fill", "nan_to_num", "nn.functional.nll_loss", "triu",
                 "nn.functional.softshrink")),
    Rule("opinfo:trunc-bf16-*", PEER_BUG,
         "the peer's trunc converter (impl/unary/ops.py) returns a copy of its input when "
         "the dtype is not float16/float32, counting bf16 as an integer type"),
    Rule("opinfo:nn.functional.softplus-*", PEER_BUG,
         "the sample has beta=3, threshold=0.2; the peer's softplus converter "
         "(impl/activation/ops.py) takes beta only (one ACTIVATION SOFTPLUS), so the "
         "threshold is dropped: values with beta*x > 0.2 are log(1 + exp(beta*x))/beta "
         "instead of x", message="RMSE vs float64"),
    Rule("opinfo:nn.functional.adaptive_avg_pool*", PEER_BUG, _FIXED_WINDOW,
         message="RMSE vs float64"),
    Rule("opinfo:diag*-bf16-*", PEER_BUG,
         "diag of a vector lowers to where over a constant mask; the peer's network casts "
         "the bf16 values to INT32 before the SELECT (CAST BF16->INT32 ... SELECT ... CAST "
         "INT32->BF16): diag([1.25, 2.5, -4.5]) comes back with 1, 2, -4 on the diagonal, "
         "the bf16 where bug. Repro: conformance/peer_repros/where_bf16.py"),
    Rule("aten.trunc.default-*-bf16-*", PEER_BUG,
         "the peer's trunc converter (impl/unary/ops.py) returns a copy of its input when "
         "the dtype is not float16/float32, counting bf16 as an integer type, so bf16 "
         "values keep their fractions (max abs error < 1, eager exact). Repro: "
         "conformance/peer_repros/trunc_bf16.py"),
    Rule("aten.reciprocal.default-int-*", PEER_BUG,
         "reciprocal of an int tensor is float in torch (1/2 = 0.5); the peer's network "
         "divides in the integer type (1/2 = 0), the integer true division bug above. Repro: "
         "conformance/peer_repros/int_true_div.py"),
    Rule("*", PEER_BUG, _RAISES, message="ZeroDivisionError: integer modulo by zero"),
    Rule("aten.nonzero.default-*", PEER_BUG,
         "the peer's support check accepts nonzero, then its converter raises 'This is only "
         "available in non TensorRT-RTX environments': its validator does not know its own "
         "TensorRT-RTX limit, so on a GPU with TensorRT-RTX the compile fails the same way. "
         "Repro: conformance/peer_repros/nonzero_rtx.py",
         message="non TensorRT-RTX"),
    Rule("*", DEVIATION,
         "the peer's lowering or converter allocates a tensor on its target device (cuda:0) "
         "while folding the op (empty_strided / empty_permuted), which needs a GPU: an "
         "artifact of the CPU run (these ops return uninitialized memory, so no value would "
         "be compared anyway)", message="Found no NVIDIA driver"),
    Rule("*", PEER_BUG, _INVALID, message="the peer's network is invalid"),
    # the same, as runs before InvalidNetwork reported it (TensorRT's Dims of -1 rank)
    Rule("*", PEER_BUG, _INVALID, message="ValueError: __len__() should return >= 0"),
    Rule("*", PEER_BUG,
         "our executor raises where TensorRT's ISliceLayer documentation says STRICT_BOUNDS "
         "'fails with an error when the coordinates are out of bounds': the peer's network "
         "slices with a start it did not normalize for the dynamic size (start < 0 or past "
         "the end at the min/max shapes), which a GPU engine would reject or read wrongly. "
         "Repros: conformance/peer_repros/slice_dynamic_start.py (x[-3::2] at size 1: start "
         "-3 + 1 = -2, not clamped to 0) and conformance/peer_repros/slice_symbolic_start.py "
         "(x[-n + 1:]: the symbolic start -5 at n = 6 is not made 1)",
         message="slice reads out of bounds"),
    Rule("*", PEER_BUG, _SHAPE, message=" shape ("),
    Rule("*", PEER_BUG, _SHAPE, message=" dtype torch."),
    Rule("*", PEER_BUG, _RAISES, message="AssertionError: "),
    Rule("*", PEER_BUG, _RAISES, message="'NoneType' object has no attribute 'type'"),
    Rule("*", PEER_BUG, _RAISES, message="has no attribute 'stride_nd'"),
    Rule("*", PEER_BUG, _RAISES, message="TypeError: int() argument must be"),
    Rule("*", PEER_BUG, _RAISES, message="TypeError: __eq__(): incompatible function"),
    Rule("*", PEER_BUG, _RAISES, message="IndexError: tuple index out of range"),
    Rule("*", PEER_BUG, _RAISES, message="ValueError: TensorRT does not support float64"),
    Rule("prims.broadcast_in_dim.*", PEER_BUG,
         "the peer's lowering (ExportedProgram.run_decompositions with its decomposition "
         "table) refuses prims.broadcast_in_dim, whose schema returns an alias (Tensor(a)): "
         "'Found a custom (non-ATen) operator whose output has alias annotations'; the op "
         "is in its converter table, so its support check accepted the graph",
         message="alias annotations"),
    Rule("*", DEVIATION,
         "the peer's lowering makes its constants on its target device (cuda:0) while the "
         "program was exported with CPU tensors, as it must be on a machine without a GPU; "
         "torch's fake-tensor check then refuses to mix devices. On a GPU the inputs are on "
         "cuda:0 and this does not arise: an artifact of the CPU run, not a converter bug",
         message="FakeTensorDeviceMismatchError"),
]


def classify(cell_id: str, message: str = "") -> tuple[str, str] | None:
    """(class, evidence) of a failing cell, or None when no rule matches it."""
    for rule in TRIAGE:
        if fnmatch.fnmatchcase(cell_id, rule.cells) and rule.message in message:
            return rule.cls, rule.evidence
    return None
