"""Conformance cells through Torch-TensorRT (``conformance.peer``): our cases
(``conformance/cases``, every dtype, static and dynamic) and the OpInfo samples of the
manifest, each exported as our runner exports it, compiled by the peer's own pipeline, its
networks run on our reference executor and judged by the same float64 rule
(``runner.compare`` for our cases, ``accuracy.judge`` for OpInfo samples, as each suite
judges our own backend). Import only in the peer's environment."""

from __future__ import annotations

import sys
import types
import unittest
import warnings

import torch

from torch_trt_ref.accuracy import judge, to_float64
from torch_trt_ref.capture import export_program

from . import opinfo, runner
from .case import W
from .opinfo import CellKey, Outcome
from .peer import SentToPyTorch, SnapshotError, compile_program, peer_input

# torch's OpInfo database (torch.testing._internal) imports ``expecttest`` for the base class
# of its TestCase; the peer's environment does not have that test helper. OpInfo samples
# never use it, so a stand-in with unittest's TestCase is enough to load op_db.
if "expecttest" not in sys.modules:
    try:
        import expecttest  # noqa: F401
    except ImportError:
        sys.modules["expecttest"] = types.SimpleNamespace(TestCase=unittest.TestCase)

# "passed"; failures (the peer converted the whole graph and it does not pass); outside
# the converted count: "not_converted" (the peer leaves ops to PyTorch), "not_exported",
# "skipped" (no comparable eager result), "absent" (no such OpInfo sample).
FAILURES = ("mismatch", "convert_error", "run_error", "harness_error")
CONVERTED = ("passed",) + FAILURES


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return f"{type(err).__name__}: " + (text.splitlines()[0][:300] if text else "")


def _compile(ep, inputs) -> tuple[Outcome | None, object]:
    try:
        return None, compile_program(ep, inputs)
    except SentToPyTorch as err:
        return Outcome("not_converted", "; ".join(err.ops)[:300]), None
    except SnapshotError as err:  # our reader, not the peer: a bug of this harness
        return Outcome("harness_error", _first_line(err)), None
    except Exception as err:  # the peer's lowering, partitioner or a converter raised
        return Outcome("convert_error", _first_line(err)), None


def run_case_cell(case, dtype: torch.dtype, dynamic: bool) -> Outcome:
    """One cell of our cases through the peer (``runner.run_cell``'s shapes and judging;
    dynamic cells run at the opt, min and max shapes)."""
    module = runner.OneOp(case, dtype)
    specs, dyn_shapes = runner._inputs(case, dynamic)
    tensor_args = [a for _, a in case.tensor_args() if not isinstance(a, W)]
    example = [a.make(dtype, seed=i) for i, a in enumerate(tensor_args)]
    oblivious = dynamic and any(a < 2 and a != c for _, lo, hi in specs
                                for a, c in zip(lo, hi))
    try:
        ep = export_program(module, tuple(example), {},
                            (tuple(dyn_shapes),) if dynamic else None, size_oblivious=oblivious)
    except Exception as err:
        return Outcome("not_exported", _first_line(err))
    inputs = [peer_input(lo, opt, hi, x.dtype) for (opt, lo, hi), x in zip(specs, example)]
    failed, compiled = _compile(ep, inputs)
    if failed:
        return failed
    atol, rtol = case.tolerance(dtype)
    shape_sets = [[s[k] for s in specs] for k in ((1, 0, 2) if dynamic else (0,))]
    for k, shapes in enumerate(shape_sets):
        xs = example if not dynamic else [a.make(dtype, shape=s, seed=10 * k + i)
                                          for i, (a, s) in enumerate(zip(tensor_args, shapes))]
        try:
            expected64 = runner._eager64(module, xs)
        except (RuntimeError, NotImplementedError, TypeError) as err:
            expected64 = err
        try:
            with torch.no_grad():
                got = compiled(*xs)
        except Exception as err:
            return Outcome("run_error", _first_line(err))
        where = f"shapes {[tuple(x.shape) for x in xs]}"
        try:
            runner.compare(got, runner._eager(case, module, xs, dtype), expected64, atol, rtol,
                           where, {})
        except AssertionError as err:
            return Outcome("mismatch", str(err).strip().replace("\n", " ")[:400])
    return Outcome("passed")


def run_opinfo_cell(key: CellKey) -> Outcome:
    """One OpInfo sample through the peer (``opinfo._run_cell``'s checks and judging)."""
    if key.op in opinfo.UNINITIALIZED:
        return Outcome("skipped", "the op returns uninitialized memory")
    if (key.op, key.variant) not in opinfo.op_db():
        return Outcome("absent", f"torch {torch.__version__} has no OpInfo {key.op}")
    found = opinfo.samples(key.op, key.variant, key.dtype)
    if key.index >= len(found):
        return Outcome("absent", f"the OpInfo has {len(found)} samples in {key.dtype}")
    module = opinfo.OpCall(opinfo.op_db()[(key.op, key.variant)], found[key.index]).eval()
    example = module.example
    clone = opinfo._clone
    try:
        with torch.no_grad():
            torch.manual_seed(0)
            eager = opinfo._detach(module(*clone(example)))
            torch.manual_seed(1)
            again = module(*clone(example))
            reference = module(*to_float64(clone(example)))
    except Exception as err:
        return Outcome("skipped", f"eager raised {_first_line(err)}")
    if not opinfo._equal(eager, again):
        return Outcome("skipped", "nondeterministic op (eager differs between two runs)")
    if not any(isinstance(t, torch.Tensor) for t in torch.utils._pytree.tree_flatten(eager)[0]):
        return Outcome("skipped", "no tensor output")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ep = torch.export.export(module, clone(example), strict=False)
    except Exception as err:
        return Outcome("not_exported", _first_line(err))
    if opinfo._random_ops(ep):
        return Outcome("skipped", "random op")
    inputs = [peer_input(x.shape, x.shape, x.shape, x.dtype) for x in example]
    failed, compiled = _compile(ep, inputs)
    if failed:
        return failed
    try:
        with torch.no_grad():
            got = compiled(*clone(example))
    except Exception as err:
        return Outcome("run_error", _first_line(err))
    try:
        verdict = judge(got, eager, reference)
    except Exception as err:  # structure differs (output count, dtype, shape)
        return Outcome("mismatch", _first_line(err))
    return Outcome("passed") if verdict.passed else Outcome("mismatch", verdict.message)
