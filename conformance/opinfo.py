"""OpInfo-driven conformance (DESIGN D10): PyTorch's own OpInfo samples (``op_db``) become
conformance cells, generated at run time from the installed torch. A cell whose lowered
graph converts fully is compiled, run by the reference executor and judged against eager
float64 (``torch_trt_ref.accuracy``); a cell that does not convert is counted, not failed."""

from __future__ import annotations

import functools
import itertools
import re
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.utils._pytree import tree_flatten, tree_map, tree_unflatten

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16,
          "int32": torch.int32, "int64": torch.int64}
FLOAT_DTYPES = ("fp32", "fp16", "bf16")  # the default set; integer dtypes on request
FULL_SAMPLES = 6  # samples per OpInfo and dtype in the full set
CI_SAMPLES = 1  # ... and in the default (CI) subset (the time budget of CI)
# Outcomes: "passed"; failures: "mismatch", "compile_error", "run_error" (and
# "harness_error", a bug of this module); outside the
# denominator: "not_converted" (some node stays in PyTorch), "not_exported", "skipped".
FAILURES = ("mismatch", "compile_error", "run_error", "harness_error")
COUNTED = ("passed",) + FAILURES
# OpInfos whose outputs are uninitialized memory: any value is right.
UNINITIALIZED = frozenset({"empty", "empty_like", "empty_strided", "empty_permuted",
                           "new_empty", "new_empty_strided"})
# The cells of the last full run that converted fully; the CI subset is drawn from it so
# collection needs no sample generation (``python -m conformance.opinfo_report --full
# --write-manifest`` rewrites it).
MANIFEST = Path(__file__).resolve().parent / "opinfo_cells.txt"


@dataclass(frozen=True)
class CellKey:
    """One cell: an OpInfo (name and variant), a dtype name and a sample index."""

    op: str
    variant: str
    dtype: str
    index: int

    @property
    def id(self) -> str:
        op = f"{self.op}.{self.variant}" if self.variant else self.op
        return f"{op}-{self.dtype}-s{self.index}"

    @classmethod
    def parse(cls, cell_id: str) -> "CellKey":
        op, dtype, index = cell_id.rsplit("-", 2)
        name, variant = split_op(op)
        return cls(name, variant, dtype, int(index[1:]))


@dataclass
class Outcome:
    """What one cell did; ``message`` says why it failed or was not counted."""

    outcome: str
    message: str = ""
    seconds: float = 0.0

    def to_json(self) -> dict:
        return {"outcome": self.outcome, "message": self.message[:400],
                "seconds": round(self.seconds, 3)}


def _clean(text: str) -> str:
    return re.sub(r"[^\w.]", "_", text)


@functools.lru_cache(maxsize=1)
def op_db() -> dict[tuple[str, str], object]:
    """OpInfos by (name, variant) in op_db order (import takes a few seconds)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from torch.testing._internal.common_methods_invocations import op_db as db
    out = {}
    for info in db:
        out.setdefault((_clean(info.name), _clean(info.variant_test_name)), info)
    return out


def split_op(op: str) -> tuple[str, str]:
    """``"nn.functional.pad.constant"`` -> (name, variant), by lookup in op_db."""
    for (name, variant) in op_db():
        if variant and op == f"{name}.{variant}":
            return name, variant
    return op, ""


def dtypes_of(info, names=FLOAT_DTYPES) -> list[str]:
    supported = info.supported_dtypes("cpu")
    return [name for name in names if DTYPES[name] in supported]


@functools.lru_cache(maxsize=8)
def samples(name: str, variant: str, dtype: str) -> tuple:
    """The first ``FULL_SAMPLES`` CPU samples of one OpInfo in one dtype. Sample generators use
    torch's global RNG, so it is seeded first: every process makes the same samples."""
    info = op_db()[(name, variant)]
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            gen = info.sample_inputs("cpu", DTYPES[dtype], requires_grad=False)
            return tuple(itertools.islice(gen, FULL_SAMPLES))
        except Exception:  # an OpInfo whose generator fails here has no cells
            return ()


def cell_keys(per_dtype: int = FULL_SAMPLES, ops=None,
              dtypes=FLOAT_DTYPES) -> list[CellKey]:
    """Every cell: each OpInfo (or those named in ``ops``), each dtype it supports on CPU,
    sample indices below ``per_dtype``. Samples are not made here (that takes minutes for
    all of op_db): an index past an OpInfo's last sample runs as outcome "absent"."""
    keys = []
    for (name, variant), info in op_db().items():
        if ops is not None and (name, variant) not in ops:
            continue
        for dtype in dtypes_of(info, dtypes):
            keys += [CellKey(name, variant, dtype, i) for i in range(per_dtype)]
    return keys


def ci_keys(per_dtype: int = CI_SAMPLES) -> list[CellKey]:
    """The default subset: the manifest's cells with a sample index below ``per_dtype``
    (every cell of the first ``per_dtype`` samples when there is no manifest)."""
    if not MANIFEST.exists():
        return cell_keys(per_dtype)
    keys = [CellKey.parse(line.strip()) for line in MANIFEST.read_text().splitlines()
            if line.strip() and not line.startswith("#")]
    return [k for k in keys if k.index < per_dtype]


def write_manifest(cells: dict[str, dict]) -> None:
    converted = sorted(c for c, v in cells.items() if v["outcome"] in COUNTED)
    MANIFEST.write_text(f"# OpInfo cells that converted fully (torch {torch.__version__}); "
                        "written by conformance.opinfo_report --write-manifest\n"
                        + "".join(f"{c}\n" for c in converted))


class OpCall(torch.nn.Module):
    """Calls the OpInfo's op on a sample; every tensor of the sample is a model input,
    everything else a constant of the module."""

    def __init__(self, info, sample):
        super().__init__()
        self.fn = info.op
        leaves, self.spec = tree_flatten((sample.input, sample.args, sample.kwargs))
        self.slots = [i for i, v in enumerate(leaves) if isinstance(v, torch.Tensor)]
        self.constants = [None if isinstance(v, torch.Tensor) else v for v in leaves]
        self.example = tuple(leaves[i] for i in self.slots)

    def forward(self, *tensors):
        leaves = list(self.constants)
        for slot, t in zip(self.slots, tensors):
            leaves[slot] = t
        inp, args, kwargs = tree_unflatten(leaves, self.spec)
        return self.fn(inp, *args, **kwargs)


def _clone(tensors):
    return tuple(t.clone() for t in tensors)


def _comparable(t: torch.Tensor) -> torch.Tensor:
    t = t.to_dense() if t.layout != torch.strided else t
    return torch.view_as_real(t.to(torch.complex64).resolve_conj()) if t.is_complex() else t


def _equal(a, b) -> bool:
    fa, fb = tree_flatten(a)[0], tree_flatten(b)[0]
    if len(fa) != len(fb):
        return False
    for x, y in zip(fa, fb):
        if isinstance(x, torch.Tensor) != isinstance(y, torch.Tensor):
            return False
        if not isinstance(x, torch.Tensor):
            continue
        x, y = _comparable(x), _comparable(y)
        if (x.shape != y.shape or x.dtype != y.dtype or not (
                torch.equal(x, y) or bool(((x == y) | ((x != x) & (y != y))).all()))):
            return False
    return True


def _detach(value):
    return tree_map(lambda t: t.detach() if isinstance(t, torch.Tensor) else t, value)


def run_cell(key: CellKey) -> Outcome:
    """Export, compile fully to TensorRT, run with the reference executor and judge one
    cell against eager float64. Never raises: the outcome says what happened."""
    import time

    start = time.perf_counter()
    try:
        out = _run_cell(key)
    except Exception as err:  # a bug of this harness: reported, never hidden
        out = Outcome("harness_error", f"{type(err).__name__}: {_first_line(err)}")
    out.seconds = time.perf_counter() - start
    return out


def _run_cell(key: CellKey) -> Outcome:
    import torch_trt_ref
    from torch_trt_ref.accuracy import judge, to_float64
    from torch_trt_ref.compiler import SegmentCompilationError
    from torch_trt_ref.partitioning.driver import UnsupportedOperatorError

    if key.op in UNINITIALIZED:
        return Outcome("skipped", "the op returns uninitialized memory (no values to compare)")
    found = samples(key.op, key.variant, key.dtype)
    if key.index >= len(found):
        return Outcome("absent", f"the OpInfo has {len(found)} samples in {key.dtype}")
    module = OpCall(op_db()[(key.op, key.variant)], found[key.index]).eval()
    example = module.example
    try:
        with torch.no_grad():
            torch.manual_seed(0)
            eager = _detach(module(*_clone(example)))
            torch.manual_seed(1)
            again = module(*_clone(example))
    except Exception as err:
        return Outcome("skipped", f"eager raised {type(err).__name__}: {err}")
    if not _equal(eager, again):
        return Outcome("skipped", "nondeterministic op (eager differs between two runs)")
    if not any(isinstance(t, torch.Tensor) for t in tree_flatten(eager)[0]):
        return Outcome("skipped", "no tensor output")
    try:
        with torch.no_grad():
            reference = module(*to_float64(_clone(example)))
    except Exception as err:
        return Outcome("skipped", f"float64 eager raised {type(err).__name__}: {err}")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ep = torch.export.export(module, _clone(example), strict=False)
    except Exception as err:
        return Outcome("not_exported", f"{type(err).__name__}: {_first_line(err)}")
    random = _random_ops(ep)
    if random:
        return Outcome("skipped", f"random op ({', '.join(random)}): the OpInfo fixes torch's "
                       "seed inside the op, TensorRT's fill draws from its own generator; "
                       "judged by distribution in tests/test_random_converters.py")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compiled = torch_trt_ref.compile(ep, list(example), min_block_size=1,
                                             require_full_compilation=True,
                                             executor="reference")
    except UnsupportedOperatorError as err:
        return Outcome("not_converted", _unsupported(err))
    except SegmentCompilationError as err:
        return Outcome("compile_error", _first_line(err))
    except Exception as err:  # capture or lowering: the graph never reached TensorRT
        return Outcome("not_converted", f"before conversion: {type(err).__name__}: "
                                        f"{_first_line(err)}")
    if not compiled.compile_report.engines:
        return Outcome("not_converted", "no op left for TensorRT (empty graph)")
    try:
        with torch.no_grad():
            got = compiled(*_clone(example))
    except Exception as err:
        return Outcome("run_error", f"{type(err).__name__}: {_first_line(err)}")
    verdict = judge(got, eager, reference)
    if not verdict.passed:
        return Outcome("mismatch", verdict.message)
    return Outcome("passed")


def _random_ops(ep) -> list[str]:
    """The ops of ``ep`` that draw random values (torch's ``nondeterministic_seeded`` tag);
    a dropout with ``train=False`` or ``p=0`` (attention's ``dropout_p=0``) draws nothing."""
    found = []
    for node in ep.graph.nodes:
        target = node.target
        if node.op != "call_function" or not isinstance(target, torch._ops.OpOverload) or \
                torch.Tag.nondeterministic_seeded not in target.tags:
            continue
        schema = target._schema.arguments
        bound = {**{a.name: a.default_value for a in schema if a.has_default_value()},
                 **dict(zip((a.name for a in schema), node.args)), **node.kwargs}
        if bound.get("train") is False or bound.get("p", bound.get("dropout_p")) == 0:
            continue
        found.append(str(target))
    return sorted(set(found))


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0][:300] if text else type(err).__name__


def _unsupported(err: BaseException) -> str:
    lines = [ln.strip() for ln in str(err).splitlines()[1:] if ln.startswith("  ")]
    return "; ".join(lines)[:300] or _first_line(err)
