"""Runs one conformance cell: export a one-op module, compile it fully to TensorRT with
the real builder, execute with the reference executor and judge it against eager PyTorch
in float64 (the float64 rule of ``torch_trt_ref.accuracy``, DESIGN D10)."""

from __future__ import annotations

import importlib
import pkgutil
from contextlib import contextmanager
from typing import Iterator

import torch
from torch.export import Dim

import torch_trt_ref
from torch_trt_ref.accuracy import cast_floats, judge, tensors, to_float64
from torch_trt_ref.capture import export_program
from torch_trt_ref.settings import op_name

from .case import Case, T, W

DTYPE_NAMES = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16",
               torch.int32: "int32", torch.int64: "int64", torch.bool: "bool"}


def case_modules() -> list[str]:
    """The module names in conformance/cases, sorted (each exports ``CASES``)."""
    from . import cases

    return [f"{cases.__name__}.{info.name}"
            for info in sorted(pkgutil.iter_modules(cases.__path__), key=lambda m: m.name)]


def all_cases() -> list[Case]:
    """Every case of every module in conformance/cases."""
    return [case for name in case_modules()
            for case in getattr(importlib.import_module(name), "CASES", [])]


def cell_id(case: Case, index: int, dtype: torch.dtype, dynamic: bool) -> str:
    sample = case.name or f"s{index}"
    variant = "dynamic" if dynamic else "static"
    return f"{op_name(case.target)}-{sample}-{DTYPE_NAMES[dtype]}-{variant}"


def cells(case_list: list[Case]) -> Iterator[tuple[str, Case, torch.dtype, bool]]:
    counters: dict[str, int] = {}
    for case in case_list:
        key = op_name(case.target)
        index = counters.get(key, 0)
        counters[key] = index + 1
        for dtype in case.dtypes:
            for dynamic in ((False, True) if case.dynamic and case.tensor_args() else (False,)):
                if not dynamic and not case.static:
                    continue
                yield cell_id(case, index, dtype, dynamic), case, dtype, dynamic


class OneOp(torch.nn.Module):
    def __init__(self, case: Case, dtype: torch.dtype):
        super().__init__()
        self.case = case
        for i, arg in case.tensor_args():
            if isinstance(arg, W):
                self.register_buffer(f"w{i}", arg.make(dtype, seed=100 + i))

    def forward(self, *inputs):
        it = iter(inputs)
        args = [getattr(self, f"w{i}") if isinstance(a, W) else next(it) if isinstance(a, T)
                else a for i, a in enumerate(self.case.args)]
        return self.case.op(*args, **self.case.kwargs)


def _ranges(case: Case) -> dict[int, tuple[int, int, int]]:
    """Dynamic range per dimension size, [lo, size + 2]: lo = 1 for a leading (batch) dim,
    the range users declare most (Note [Tracing dynamic dims] in capture.py), and
    max(2, size - 1) for inner dims (kernels and index values bound them). A case's
    ``min_shape_delta`` gives lo = max(2, size - delta) for every dim. Dims of size <= 1
    stay static (they broadcast); equal sizes share one export Dim, with the larger lo."""
    ranges: dict[int, tuple[int, int, int]] = {}
    for _, arg in case.tensor_args():
        for d in arg.dynamic_dims():
            size = arg.shape[d]
            if size <= 1:
                continue
            if case.min_shape_delta is not None:
                lo = max(2, size - case.min_shape_delta)
            else:
                lo = 1 if d == 0 else max(2, size - 1)
            lo = max(lo, ranges.get(size, (lo,))[0])
            ranges[size] = (lo, size, size + 2)
    return ranges


def _inputs(case: Case, dynamic: bool):
    ranges = _ranges(case) if dynamic else {}
    specs, dyn_shapes, dims = [], [], {}
    for _, arg in case.tensor_args():
        if isinstance(arg, W):
            continue
        shape = tuple(arg.make(torch.float32).shape)
        lo, hi, spec_dims = list(shape), list(shape), {}
        for d in arg.dynamic_dims():
            if shape[d] in ranges:
                a, _, c = ranges[shape[d]]
                lo[d], hi[d] = a, c
                spec_dims[d] = (Dim.DYNAMIC(min=a, max=c) if case.infer_dims else
                                dims.setdefault(shape[d], Dim(f"s{shape[d]}", min=a, max=c)))
        specs.append((shape, tuple(lo), tuple(hi)))
        dyn_shapes.append(spec_dims or None)
    return specs, dyn_shapes


@contextmanager
def _buffers_as(module: OneOp, dtype: torch.dtype, only: torch.dtype | None = None):
    """While active, ``module``'s float buffers (those of dtype ``only``, if given) are
    copies in ``dtype``; afterwards the originals are back."""
    saved = dict(module.named_buffers())
    for n, b in saved.items():
        if b.is_floating_point() and (only is None or b.dtype == only):
            setattr(module, n, b.to(dtype))
    try:
        yield
    finally:
        for n, b in saved.items():
            setattr(module, n, b)


def _eager(case: Case, module: OneOp, inputs: list[torch.Tensor], dtype: torch.dtype):
    try:
        return module(*inputs)
    except (RuntimeError, NotImplementedError):
        if dtype not in (torch.float16, torch.bfloat16):
            raise
        # Eager CPU lacks some half kernels: compute in fp32 and round to the dtype.
        up = [x.float() if x.dtype == dtype else x for x in inputs]
        with _buffers_as(module, torch.float32, only=dtype):
            out = module(*up)
        return cast_floats(out, dtype)


def _eager64(module: OneOp, inputs: list[torch.Tensor]):
    """The op in float64: float weights and inputs cast to float64, and float64 as the
    default dtype so integer inputs promote to float64 too (int / int, sigmoid of an int)."""
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        with _buffers_as(module, torch.float64):
            return module(*to_float64(inputs))
    finally:
        torch.set_default_dtype(default)


def _structure(actual, expected, where: str) -> tuple[list, list]:
    """Exact checks (output structure, non-tensor values, dtypes, shapes); the tensor
    leaves of both."""
    flat_a, spec_a = torch.utils._pytree.tree_flatten(actual)
    flat_e, spec_e = torch.utils._pytree.tree_flatten(expected)
    assert spec_a == spec_e, f"{where}: output structure {spec_a} != eager {spec_e}"
    for k, (a, e) in enumerate(zip(flat_a, flat_e)):
        if not isinstance(e, torch.Tensor):
            assert a == e, f"{where}: output {k}: {a} != {e}"
            continue
        assert a.dtype == e.dtype, f"{where}: output {k} dtype {a.dtype}, eager {e.dtype}"
        assert a.shape == e.shape, f"{where}: output {k} shape {tuple(a.shape)}, eager " \
                                   f"{tuple(e.shape)}"
    return tensors(flat_a), tensors(flat_e)


def _within_tolerance(got: list, want: list, atol: float, rtol: float, where: str) -> None:
    for k, (a, e) in enumerate(zip(got, want)):
        if e.is_floating_point():
            torch.testing.assert_close(a, e, atol=atol, rtol=rtol, equal_nan=True,
                                       msg=lambda m: f"{where}: output {k}: {m}")
        else:
            assert torch.equal(a, e), f"{where}: output {k} differs (exact compare)"


def _tolerance_ok(got: list, want: list, atol: float, rtol: float) -> bool:
    try:
        _within_tolerance(got, want, atol, rtol, "")
    except AssertionError:
        return False
    return True


def _no_float64(want: list, expected64) -> str | None:
    """Why the float64 run cannot serve as the reference, or None when it can."""
    if isinstance(expected64, BaseException):
        line = (str(expected64).splitlines() or [""])[0][:120]
        return f"no float64 eager run ({type(expected64).__name__}: {line})"
    ref = tensors(expected64)
    if len(ref) != len(want):
        return f"the float64 run returned {len(ref)} tensors, eager {len(want)}"
    pinned = sorted({str(r.dtype) for e, r in zip(want, ref)
                     if e.is_floating_point() and r.dtype != torch.float64})
    if pinned:
        return f"the op pins its float output dtype ({', '.join(pinned)}) in float64 too"
    return None


def compare(actual, expected, expected64, atol: float, rtol: float, where: str,
            record: dict) -> None:
    """Judge one run of the cell, filling ``record`` before any assertion fails. Structure,
    dtypes, shapes and integer outputs are exact; float outputs follow the float64 rule
    (``torch_trt_ref.accuracy``). Without a float64 result (``expected64`` is the exception
    of the float64 run: no float64 kernel) the case's (atol, rtol) decides, and the record
    says so."""
    got, want = _structure(actual, expected, where)
    floats = any(e.is_floating_point() for e in want)
    # the old criterion, recorded so the report can show what the rule changed
    record["tolerance_passed"] = _tolerance_ok(got, want, atol, rtol)
    fallback = _no_float64(want, expected64) if floats else "no float output"
    if fallback:
        record.update(rule="tolerance" if floats else "exact", passed=False,
                      fallback=fallback)
        _within_tolerance(got, want, atol, rtol, where)
        record["passed"] = True
        return
    verdict = judge(got, want, tensors(expected64))
    summary, worst = verdict.to_json(), verdict.worst()
    record.update(rule="float64", passed=verdict.passed,
                  allowed_rmse=worst.allowed_rmse if worst else 0.0,
                  **{k: summary[k] for k in ("compiled_rmse", "eager_rmse", "ratio",
                                             "compiled_max_abs", "eager_max_abs")})
    assert verdict.passed, f"{where}: {verdict.message}"


def _profiles(lo: tuple[int, ...], opt: tuple[int, ...], hi: tuple[int, ...]) -> list[dict]:
    """Two optimization profiles splitting a dynamic range at the traced size (the
    "profiles" variant): [lo, size] with opt lo, and [size, hi] with opt size + 1 where
    the range allows."""
    mid = tuple(min(o + 1, c) for o, c in zip(opt, hi))
    return [{"min": lo, "opt": lo, "max": opt}, {"min": opt, "opt": mid, "max": hi}]


def run_cell(case: Case, dtype: torch.dtype, dynamic: bool, record: dict | None = None,
             profiles: bool = False) -> None:
    """Raise AssertionError (or the compiler's error) when the cell does not pass. The
    accuracy of the worst run (largest compiled/eager error ratio) goes to ``record``.
    ``profiles`` (with ``dynamic``): one engine with two optimization profiles
    (``_profiles``), each pinned in turn and run at its opt, min and max shapes."""
    module = OneOp(case, dtype)
    specs, dyn_shapes = _inputs(case, dynamic)
    tensor_args = [a for _, a in case.tensor_args() if not isinstance(a, W)]
    example = [a.make(dtype, seed=i) for i, a in enumerate(tensor_args)]
    oblivious = dynamic and any(a < 2 and a != c for _, lo, hi in specs
                                for a, c in zip(lo, hi))
    ep = export_program(module, tuple(example), {}, (tuple(dyn_shapes),) if dynamic else None,
                        size_oblivious=oblivious)
    inputs = [torch_trt_ref.Input(profiles=_profiles(lo, opt, hi), dtype=x.dtype)
              if profiles and lo != hi else
              torch_trt_ref.Input(min_shape=lo, opt_shape=opt, max_shape=hi, dtype=x.dtype)
              for (opt, lo, hi), x in zip(specs, example)]
    compiled = torch_trt_ref.compile(ep, inputs, min_block_size=1, require_full_compilation=True,
                                     executor="reference", **case.settings)
    used = {}
    for engine in compiled.compile_report.engines:
        used.update(engine.converters)
    assert op_name(case.target) in used, (
        f"{op_name(case.target)} is not in the converted graph (converters used: "
        f"{sorted(used)}): a decomposition made this case vacuous")
    atol, rtol = case.tolerance(dtype)
    shape_sets = [(None, [s[0] for s in specs])]
    if dynamic and not profiles:
        shape_sets = [(None, [s[k] for s in specs]) for k in (1, 0, 2)]
    if profiles:
        shape_sets = [(p, [getattr(spec.profile(p), at) for spec in inputs])
                      for p in range(2) for at in ("opt_shape", "min_shape", "max_shape")]
    # imported here: the gate's family servers import this module with the library of an
    # older base commit (Note [What the measurement code may import])
    from torch_trt_ref.runtime.profiles import last_profiles, optimization_profile

    record = {} if record is None else record
    for k, (profile, shapes) in enumerate(shape_sets):
        xs = example if not dynamic else [
            a.make(dtype, shape=s, seed=10 * k + i)
            for i, (a, s) in enumerate(zip(tensor_args, shapes))]
        try:
            expected64 = _eager64(module, xs)
        except (RuntimeError, NotImplementedError, TypeError) as err:
            expected64 = err
        run: dict = {}
        try:
            with optimization_profile(compiled, "auto" if profile is None else profile):
                got = compiled(*xs)
            if profile is not None:
                ran = set(last_profiles(compiled).values())
                assert ran == {profile}, f"pinned profile {profile}, the engines ran {ran}"
            compare(got, _eager(case, module, xs, dtype), expected64, atol, rtol,
                    f"shapes {[tuple(x.shape) for x in xs]}"
                    + ("" if profile is None else f" in profile {profile}"), run)
        finally:  # keep the worst run: a failing one, else the largest error ratio
            if run and (record.get("passed", True) or not record) and (
                    not run.get("passed", True) or run.get("ratio", 0.0) >= record.get(
                        "ratio", 0.0)):
                record.clear()
                record.update(run)
