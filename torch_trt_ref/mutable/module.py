"""``MutableModule``: a compiled model that follows the weights of the model it wraps
(the peer's ``MutableTorchTensorRTModule``; docs/deploy.md "Weights that change").

Note [What a call checks]: before running, a call compares the wrapped model with what the
compiled module holds, cheapest first: (1) the inputs' shapes and dtypes against the compiled
input specs, (2) the module tree (path and type of each module: ``view.structure``), (3) a
signature per compiled weight (tensor identity and version counter, and for a LoRA weight
its active adapters: ``view.signatures``); only the entries whose signature
moved are recomputed and compared by value with the weights applied last. Changed values are
refit into the engines whose refit map names them (``refit.refit_engines``); a changed
shape, dtype, set of weights or module tree, or inputs outside the compiled specs, recompile
with a warning that says why. No change: the compiled module runs as is.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field
from typing import Any

import torch

from ..compiler import compile as compile_model
from ..inputs import Input
from ..refit import refit_engines
from ..settings import CompilationSettings
from . import view


class RecompileWarning(UserWarning):
    """A ``MutableModule`` recompiles: the message says what changed."""


@dataclass
class Update:
    """What the last call did before running: ``action`` is "compile", "recompile",
    "refit" or "none"; ``engines`` the engines refit, ``entries`` the weights that changed,
    ``reason`` why it recompiled; ``cpu_seconds`` the process CPU time the check and the
    compile or refit took (not the run)."""

    action: str
    engines: list[str] = field(default_factory=list)
    entries: list[str] = field(default_factory=list)
    reason: str = ""
    cpu_seconds: float = 0.0


class MutableModule(torch.nn.Module):
    """Wraps ``model`` and compiles it lazily, on the first call (or for ``inputs``: tensors
    or ``Input`` specs, as ``torch_trt_ref.compile`` takes them), with ``settings``.

    Changes to the wrapped model (``load_state_dict``, an assigned parameter, peft's
    ``load_adapter`` / ``set_adapter`` / ``merge_adapter``) are seen at the next call: the
    engines whose weights changed are refit, the others kept; a change of input shapes or
    dtypes, of the weights' shapes or of the module tree recompiles with a
    ``RecompileWarning`` (Note [What a call checks]). Attributes the wrapper lacks are read
    from the model (``mm.set_adapter("b")``). ``last_update`` says what the last call did;
    ``compiled`` is the current compiled module."""

    def __init__(self, model: torch.nn.Module, *inputs: Any,
                 kwarg_inputs: dict[str, Any] | None = None, **settings: Any):
        super().__init__()
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"MutableModule wraps an nn.Module, not {type(model).__name__}")
        vars(self)["model"] = model  # not a submodule: state_dict() is the model's own
        self.settings = CompilationSettings.from_kwargs(**settings)
        self.compiled: torch.nn.Module | None = None
        self.last_update = Update("none")
        self.compile_count = self.refit_count = 0
        self._inputs = list(inputs) or None
        self._kwarg_inputs = dict(kwarg_inputs or {})
        self._ranges: tuple[tuple, dict] | None = None
        self._applied: dict[str, torch.Tensor] = {}  # the weights the engines hold
        self._signatures: dict[str, tuple] = {}
        self._structure: tuple = ()
        self._specs: list[Input] = []
        self._kw_specs: dict[str, Input] = {}

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(vars(self)["model"], name)

    # -- the model's state ---------------------------------------------------------------
    def state_dict(self, *args, **kwargs):
        return self.model.state_dict(*args, **kwargs)

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        """``model.load_state_dict``: the new weights are refit at the next call."""
        return self.model.load_state_dict(state_dict, strict=strict, assign=assign)

    def set_expected_dynamic_shape_range(self, args_dynamic_shape: tuple = (),
                                         kwargs_dynamic_shape: dict | None = None) -> None:
        """Declare dynamic dims, as the peer does: ``args_dynamic_shape`` one dict per
        positional input, ``{dim: {"min": a, "opt": b, "max": c}}`` (``{}``: static), and
        ``kwargs_dynamic_shape`` the same by keyword. The next call compiles with these
        ranges (the other dims take the call's sizes). A later call outside a range
        recompiles for the range widened to its size."""
        args_dynamic_shape = tuple(args_dynamic_shape)
        kwargs_dynamic_shape = dict(kwargs_dynamic_shape or {})
        for where, dims in [*enumerate(args_dynamic_shape), *kwargs_dynamic_shape.items()]:
            for dim, r in (dims or {}).items():
                if not (isinstance(dim, int) and isinstance(r, dict)
                        and set(r) == {"min", "opt", "max"}):
                    raise ValueError(f"input {where!r}: a dynamic dim is {{dim (int): "
                                     f"{{'min': a, 'opt': b, 'max': c}}}}, got {dim!r}: {r!r}")
                if not 0 <= r["min"] <= r["opt"] <= r["max"]:
                    raise ValueError(f"input {where!r} dim {dim}: needs 0 <= min <= opt <= "
                                     f"max, got {r}")
        self._ranges = (args_dynamic_shape, kwargs_dynamic_shape)
        self.compiled = None  # compiled anew for the ranges at the next call
        self._inputs, self._kwarg_inputs = None, {}

    # -- a call ----------------------------------------------------------------------------
    def forward(self, *args: Any, **kwargs: Any) -> Any:
        start = time.process_time()
        if self.compiled is None:
            self._compile(args, kwargs, "compile", "")
            reason = self._input_change(args, kwargs)
        else:
            reason = self._input_change(args, kwargs) or self._follow_weights()
        if reason is not None:
            warnings.warn(f"MutableModule recompiles: {reason}", RecompileWarning,
                          stacklevel=2)
            self._compile(args, kwargs, "recompile", reason)
        self.last_update.cpu_seconds = time.process_time() - start
        return self.compiled(*args, **kwargs)

    def _follow_weights(self) -> str | None:
        """Refit what changed in the model's weights; the reason to recompile instead, or
        None (Note [What a call checks])."""
        base = view.base_model(self.model)
        signatures = view.signatures(base)
        reason = self._structure_change(signatures, view.structure(base))
        if reason is None and signatures == self._signatures:
            self.last_update = Update("none")
        elif reason is None:
            self._refit(signatures)
        return reason

    def _compile(self, args: tuple, kwargs: dict, action: str, reason: str) -> None:
        base = view.base_model(self.model)
        plain = view.plain_copy(base)
        inputs, kwarg_inputs = self._compile_inputs(args, kwargs)
        self.compiled = compile_model(plain, inputs, kwarg_inputs, settings=self.settings)
        self._specs = [self._spec(v) for v in inputs]
        self._kw_specs = {k: self._spec(v) for k, v in kwarg_inputs.items()}
        self._signatures = view.signatures(base)
        self._structure = view.structure(base)
        self._applied = {k: v.detach().clone() for k, v in view.values(base).items()}
        self.compile_count += 1
        self.last_update = Update(action, reason=reason)

    @staticmethod
    def _spec(value: Any) -> Input:
        return value if isinstance(value, Input) else Input.from_tensor(value)

    def _compile_inputs(self, args: tuple, kwargs: dict) -> tuple[list, dict]:
        """The inputs to compile for: those given at construction while the call fits
        them, else the call's tensors with the declared dynamic ranges."""
        if self._inputs is not None and self.compile_count == 0:
            return self._inputs, self._kwarg_inputs
        if self._ranges is None:
            return list(args), dict(kwargs)
        arg_ranges, kw_ranges = self._ranges
        inputs = [_ranged(v, arg_ranges[i] if i < len(arg_ranges) else {})
                  for i, v in enumerate(args)]
        return inputs, {k: _ranged(v, kw_ranges.get(k, {})) for k, v in kwargs.items()}

    def _input_change(self, args: tuple, kwargs: dict) -> str | None:
        """Why the call's inputs do not fit the compiled specs, or None."""
        given = [(f"input {i}", v, s) for i, (v, s) in enumerate(zip(args, self._specs))]
        given += [(f"input {k!r}", v, self._kw_specs.get(k)) for k, v in kwargs.items()]
        if len(args) != len(self._specs) or set(kwargs) != set(self._kw_specs):
            return (f"the call passes {len(args)} positional inputs and keywords "
                    f"{sorted(kwargs)}; the module was compiled for {len(self._specs)} and "
                    f"{sorted(self._kw_specs)}")
        for what, value, spec in given:
            if not isinstance(value, torch.Tensor):
                continue
            if value.dtype != spec.dtype:
                return f"{what} has dtype {value.dtype}, compiled for {spec.dtype}"
            if not spec.contains(tuple(value.shape)):
                return f"{what} has shape {tuple(value.shape)}, compiled for {spec.describe()}"
        return None

    def _structure_change(self, signatures: dict[str, tuple], structure: tuple) -> str | None:
        """Why the model's weights or modules no longer fit the compiled module, or None."""
        old, new = self._signatures, signatures
        if set(old) != set(new):
            gone, added = sorted(set(old) - set(new)), sorted(set(new) - set(old))
            return f"the model's weights changed: removed {gone[:5]}, added {added[:5]}"
        for key in old:
            if old[key][:2] != new[key][:2]:
                return (f"weight {key} changed from {old[key][0]} {old[key][1]} to "
                        f"{new[key][0]} {new[key][1]}")
        if structure != self._structure:
            moved = sorted(set(structure) ^ set(self._structure))
            return f"the model's modules changed: {moved[:5]}"
        return None

    def _refit(self, signatures: dict[str, tuple]) -> None:
        moved = [k for k in signatures if signatures[k] != self._signatures[k]]
        fresh = view.values(view.base_model(self.model), set(moved))
        changed = [k for k in moved if not torch.equal(fresh[k], self._applied[k])]
        for key in changed:
            self._applied[key] = fresh[key].detach().clone()
        engines = refit_engines(self.compiled, self._applied, changed) if changed else []
        self._signatures = signatures
        self.refit_count += bool(changed)
        self.last_update = Update("refit" if changed else "none", engines, changed)

    @property
    def compile_report(self):
        return None if self.compiled is None else self.compiled.compile_report


def _ranged(value: Any, dims: dict) -> Any:
    """``value`` as an ``Input`` with the dynamic ``dims`` ({dim: {min, opt, max}}), each
    range widened to hold the call's size; a tensor without dynamic dims stays a tensor."""
    if not dims or not isinstance(value, torch.Tensor):
        return value
    lo, opt, hi = (list(value.shape) for _ in range(3))
    for d, r in dims.items():
        lo[d], opt[d], hi[d] = min(r["min"], lo[d]), r["opt"], max(r["max"], hi[d])
    return Input(min_shape=lo, opt_shape=opt, max_shape=hi, dtype=value.dtype)
