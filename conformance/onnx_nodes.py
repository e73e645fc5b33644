"""ONNX's backend node test cases as an oracle for the reference executor: each case's model
is parsed into a TensorRT network by TensorRT's own ONNX parser, snapshotted, run on CPU
and compared with the expected outputs ONNX ships (generated from the ``onnx`` package at
run time; no data files)."""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass, field

import numpy as np
import onnx
import onnx.numpy_helper
import torch

from torch_trt_ref.runtime.network import (
    OnnxNetwork,
    OnnxParseError,
    parse_onnx,
)
from torch_trt_ref.runtime.reference.executor import run_snapshot
from torch_trt_ref.runtime.reference.layers.quantize_ops import (
    RejectedByTensorRT,
    represent,
    widen,
)
from torch_trt_ref.runtime.snapshot import NetworkSnapshot

# Outcomes of one case. "not parsed" cases are counted (the report lists them) but have
# no network to run; the pass rate is over the parsed ones.
PASSED, FAILED, ERROR, NOT_PARSED = "passed", "failed", "error", "not parsed"
# Note [Rejected by TensorRT]: a parsed network TensorRT's builder refuses (a CAST to or
# from FP8/FP4/INT4, a non-zero quantization zero point) has no engine whose outputs the
# executor could state. The executor raises RejectedByTensorRT for such a network; the
# harness then asks the real builder, and the case counts as rejected only when the builder
# does refuse it (otherwise it is an error of ours). Rejected cases are counted apart, like
# unparsed ones, and the pass rate is over the cases TensorRT builds.
REJECTED = "rejected by the builder"
OUTCOMES = (PASSED, FAILED, ERROR, NOT_PARSED, REJECTED)

# Note [ONNX tolerances]: the tolerances are ONNX's own. Every node TestCase carries
# rtol=1e-3, atol=1e-7 (onnx/backend/test/case/node/__init__.py, `expect`), and the backend
# runner compares with np.testing.assert_allclose(out, ref, rtol, atol) after asserting
# equal shapes and dtypes, raising rtol to 2**-6 (two ulps) for bfloat16 outputs
# (onnx/backend/test/runner/__init__.py, `assert_similar_outputs`). assert_allclose treats
# NaN as equal to NaN and inf only as equal to the same inf, so NaN and inf positions must
# match. Integer and bool outputs are compared exactly. float16 keeps rtol=1e-3 as ONNX
# does (about one fp16 ulp).
BF16_RTOL = 2.0 ** -6


@dataclass
class Outcome:
    name: str
    outcome: str  # one of OUTCOMES
    reason: str = ""  # why not passed: parser error, mismatch, exception summary
    kinds: dict[str, int] = field(default_factory=dict)  # TensorRT layer kind -> count
    notes: list[str] = field(default_factory=list)  # dtype changes TensorRT made

    def to_json(self) -> dict:
        return asdict(self)


@functools.lru_cache(maxsize=1)
def cases() -> dict:
    """ONNX's node test cases by name (``onnx.backend.test.case.node``), made at run time."""
    import warnings

    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():  # several case generators overflow on purpose
        warnings.simplefilter("ignore")
        return {case.name: case for case in collect_testcases(None)}


def parse(model_bytes: bytes) -> OnnxNetwork:
    """The TensorRT network of a serialized ONNX model (raises OnnxParseError)."""
    return parse_onnx(model_bytes)


def _array(value) -> np.ndarray:
    """A case's input or expected output as a numpy array (some cases ship TensorProtos,
    and numpy scalars for 0-d tensors)."""
    if isinstance(value, onnx.TensorProto):
        return onnx.numpy_helper.to_array(value)
    array = np.asarray(value)
    return array if array.flags.c_contiguous else array.copy()


def _torch(value) -> torch.Tensor:
    """A case's array as a torch tensor: ml_dtypes' bfloat16 is viewed bit for bit;
    unsigned types torch lacks are widened to int64; float8/4-bit types (no numpy
    arithmetic) go through float32, which holds all their values."""
    array = _array(value)
    name = array.dtype.name
    if name == "bfloat16":
        return torch.from_numpy(array.view(np.uint16).copy()).view(torch.bfloat16)
    if name in ("uint16", "uint32", "uint64"):
        return torch.from_numpy(array.astype(np.int64))
    if name.startswith(("float8", "float4", "int4", "uint4")):
        return torch.from_numpy(array.astype(np.float32 if "float" in name else np.int8))
    return torch.from_numpy(array.copy())


def _category(dtype: torch.dtype) -> str:
    return "bool" if dtype == torch.bool else "float" if dtype.is_floating_point else "int"


def compare(name: str, expected: np.ndarray, actual: torch.Tensor, rtol: float,
            atol: float) -> str | None:
    """None when ``actual`` matches ONNX's ``expected`` under Note [ONNX tolerances],
    else a one-line description of the first difference."""
    if isinstance(expected, (list, tuple)) or expected is None:
        return f"output {name}: ONNX expects a {type(expected).__name__}, not a tensor"
    if _array(expected).dtype == object:
        return f"output {name}: string outputs are not comparable"
    ref = _torch(expected)
    if tuple(actual.shape) != tuple(ref.shape):
        return f"output {name}: shape {tuple(actual.shape)}, expected {tuple(ref.shape)}"
    if _category(actual.dtype) != _category(ref.dtype):
        return f"output {name}: dtype {actual.dtype}, expected {ref.dtype}"
    if _category(ref.dtype) != "float":
        wrong = actual.to(torch.int64) != ref.to(torch.int64)
        if bool(wrong.any()):
            return _first(name, wrong, actual, ref, "differ")
        return None
    a, r = actual.double(), ref.double()
    if ref.dtype == torch.bfloat16 or actual.dtype == torch.bfloat16:
        rtol = max(rtol, BF16_RTOL)
    nan_wrong = a.isnan() != r.isnan()
    if bool(nan_wrong.any()):
        return _first(name, nan_wrong, actual, ref, "differ in NaN positions")
    inf_wrong = (a.isinf() | r.isinf()) & (a != r)
    if bool(inf_wrong.any()):
        return _first(name, inf_wrong, actual, ref, "differ in inf positions")
    finite = a.isfinite() & r.isfinite()
    wrong = finite & ((a - r).abs() > atol + rtol * r.abs())
    if bool(wrong.any()):
        return _first(name, wrong, actual, ref, f"differ beyond rtol={rtol:g} atol={atol:g}")
    return None


def _first(name: str, wrong: torch.Tensor, actual: torch.Tensor, ref: torch.Tensor,
           what: str) -> str:
    index = tuple(int(i) for i in wrong.nonzero()[0])
    got, want = actual[index].item(), ref[index].item()
    return (f"output {name}: {int(wrong.sum())} of {wrong.numel()} elements {what} "
            f"(at {index}: got {got:.6g}, expected {want:.6g})")


def _inputs(model, data: list, snapshot: NetworkSnapshot, notes: list[str]) -> dict:
    """The case's input arrays by name, in the dtypes TensorRT gave the network inputs
    (Note [ONNX dtypes])."""
    names = [i.name for i in model.graph.input
             if i.name not in {init.name for init in model.graph.initializer}]
    by_name = dict(zip(names, data))
    feeds, network_names = {}, [i.name for i in snapshot.inputs]
    for position, info in enumerate(snapshot.inputs):
        name = _onnx_input(info.name, position, names, network_names)
        if name != info.name:
            notes.append(f"input {info.name}: the parser's name of ONNX input {name}")
        if isinstance(info.dtype, str):
            raise TypeError(f"network input {info.name} has TensorRT type {info.dtype}, "
                            f"which torch has no dtype for")
        array = _array(by_name[name])
        value = _torch(array)
        if array.dtype.name != _numpy_name(info.dtype):
            notes.append(f"input {info.name}: {array.dtype.name} -> {info.dtype}")
        if value.dtype != info.dtype:  # FP4/INT4 as the executor holds them
            value = represent(value, info.dtype)
        feeds[info.name] = value
    return feeds


# Note [ONNX dtypes]: TensorRT has no float64, uint16/32/64 or int16; where the parser gave
# a network input or output another type than the ONNX model (e.g. double -> float), the
# case's inputs are cast to the network's input types and the outputs are compared by
# value against ONNX's expected arrays: float with ONNX's tolerances (so float32 rounding
# of a double case passes only within rtol=1e-3), integers exactly (so a value int32 cannot
# hold fails). A change of kind (float vs integer vs bool) is a failure. Each change is
# recorded in the outcome's notes, and the report lists them.
def run_case(name: str) -> Outcome:
    """Parse, snapshot, run and compare one ONNX node case."""
    case = cases()[name]
    try:
        parsed = parse(case.model.SerializeToString())
    except OnnxParseError as err:
        return Outcome(name, NOT_PARSED, str(err))
    try:
        snapshot = parsed.snapshot()
    except Exception as err:  # a bug of runtime/snapshot.py: it must read any network
        return Outcome(name, ERROR, f"snapshot: {_summary(err)}")
    outcome = Outcome(name, PASSED, kinds=snapshot.kinds())
    try:
        outcome.reason = _run_and_compare(case, snapshot, outcome.notes) or ""
    except RejectedByTensorRT as err:
        if parsed.builder_refuses():
            outcome.outcome, outcome.reason = REJECTED, _summary(err)
        else:
            outcome.outcome = ERROR
            outcome.reason = f"TensorRT's builder builds it, but the executor says: {err}"
        return outcome
    except Exception as err:  # any executor failure is this case's outcome
        outcome.outcome, outcome.reason = ERROR, _summary(err)
        return outcome
    if outcome.reason:
        outcome.outcome = FAILED
    return outcome


def _onnx_input(name: str, position: int, onnx_names: list[str],
                network_names: list[str]) -> str:
    """The ONNX input a network input stands for: the one of its name, else, when the
    parser renamed it (a Loop's ``cond`` passed straight to the body becomes ``cond_in``),
    the one at its position, as the parser adds network inputs in graph input order."""
    if name in onnx_names:
        return name
    if len(network_names) == len(onnx_names) and onnx_names[position] not in network_names:
        return onnx_names[position]
    raise KeyError(f"network input {name} is not an input of the ONNX model")


def _run_and_compare(case, snapshot: NetworkSnapshot, notes: list[str]) -> str | None:
    (data_in, data_out), = case.data_sets
    unsupported = snapshot.unsupported_kinds()
    if unsupported:
        raise NotImplementedError(f"no reference function for layer kind "
                                  f"{', '.join(unsupported)}")
    feeds = _inputs(case.model, data_in, snapshot, notes)
    with torch.no_grad():
        results = dict(zip(snapshot.outputs, run_snapshot(snapshot, feeds)))
    for info, expected in zip(case.model.graph.output, data_out):
        if info.name not in results:
            return f"output {info.name}: not an output of the TensorRT network"
        actual = results[info.name]
        problem = compare(info.name, expected, widen(actual), case.rtol, case.atol)
        if problem:
            return problem
        expected_dtype = _array(expected).dtype.name
        if expected_dtype != _numpy_name(actual.dtype):
            notes.append(f"output {info.name}: {expected_dtype} -> {actual.dtype}")
    return None


# torch dtypes whose numpy (ml_dtypes) name differs; FP4 is held one value per byte.
_NUMPY_NAMES = {torch.bool: "bool", torch.float4_e2m1fn_x2: "float4_e2m1fn"}


def _numpy_name(dtype: torch.dtype) -> str:
    return _NUMPY_NAMES.get(dtype, str(dtype).removeprefix("torch."))


def _summary(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0] if text else ''}"[:300]


def run_all(names=None, progress=None) -> list[Outcome]:
    """Outcomes of all (or the named) cases, in name order."""
    outcomes = []
    for name in sorted(names if names is not None else cases()):
        outcomes.append(run_case(name))
        if progress is not None:
            progress(outcomes[-1])
    return outcomes
