"""``refit``: new weights into a compiled module without running the builder (design D11).

The module's weight program (``torch_trt_ref.weights``, Note [Weight program]) recomputes,
from a state dict, every weight its engines and PyTorch segments hold — with the casts,
folds and converter arithmetic of the compile — and the results replace the old ones: in
each engine's network snapshot (what the reference executor runs), in its plan through
TensorRT's ``Refitter`` where a TensorRT runtime exists (elsewhere the plan is marked stale
and never executed, see ``runtime/refitter.py``), and in the PyTorch segments."""

from __future__ import annotations

import warnings
from typing import Collection, Mapping

import torch
from torch.fx import GraphModule

from .ownership import own_weights, storages_of
from .runtime.by_size import BySize
from .runtime.module import EngineModule
from .runtime.reference.folding import forget as forget_folded
from .settings import did_you_mean
from .weights import WeightProgram, WeightProgramError


class RefitError(ValueError):
    """The new weights do not fit the compiled module; the message names what differs."""


def refit(compiled: GraphModule,
          new_weights: torch.nn.Module | Mapping[str, torch.Tensor]) -> GraphModule:
    """Replace the weights of ``compiled`` (a module from ``torch_trt_ref.compile``) with
    those of ``new_weights``: a model of the same architecture or its ``state_dict()``.

    Floating-point weights are cast to the dtype the compiled model's weights had, then
    through the compile's own precision casts. Every state-dict entry of the compiled model
    must be given with its shape; a missing or unknown entry, a shape or kind of dtype that
    differs, raises ``RefitError`` naming each. Returns ``compiled``, updated in place; its
    outputs then equal those of a fresh compile of the new weights. Weights holding NaN or
    inf are taken as given (the outputs then hold them where eager's would), with a
    ``UserWarning`` naming each such weight."""
    refit_engines(compiled, new_weights)
    return compiled


def refit_engines(compiled: GraphModule,
                  new_weights: torch.nn.Module | Mapping[str, torch.Tensor],
                  changed: Collection[str] | None = None) -> list[str]:
    """``refit``, returning the names of the engines whose weights were replaced.
    ``changed``: the state-dict entries that differ from the weights ``compiled`` holds
    now; only the engines and PyTorch-segment tensors computed from one of them (the
    weight program's sources, i.e. the refit map) are replaced, the rest keep theirs.
    ``None``: every weight is replaced."""
    if isinstance(compiled, BySize):  # a module compiled per box of sizes: refit each
        names = [f"branches.{i}.{name}" for i, branch in enumerate(compiled.branches)
                 for name in _refit(branch, new_weights, changed)]
    else:
        names = _refit(compiled, new_weights, changed)
    _warn_nonfinite(_state_dict(new_weights))
    return names


def _refit(compiled: GraphModule, new_weights, changed: Collection[str] | None) -> list[str]:
    program = getattr(compiled, "weight_program", None)
    if not isinstance(program, WeightProgram):
        raise TypeError("refit takes a module returned by torch_trt_ref.compile; "
                        f"{type(compiled).__name__} has no weight program")
    state = _state_dict(new_weights)
    _check(program, state)
    try:
        values = program.run(state)
    except WeightProgramError as err:
        raise RefitError(str(err)) from err
    if changed is not None:
        changed = set(changed)
        sources = program.sources()
        values = {key: v for key, v in values.items() if changed.intersection(sources[key])}
    engines = {name: m for name, m in compiled.named_modules() if isinstance(m, EngineModule)}
    layers = {(name, layer.name): layer for name, m in engines.items()
              for layer in m.engine.snapshot.layers}
    updated: set[str] = set()
    for key, value in values.items():
        if key[0] == "engine":
            _set_engine_weight(layers[key[1:3]], *key[1:], value)
            updated.add(key[1])
        else:
            _set_attribute(compiled, *key[1:], value)
    # The replayed values may be views of the caller's tensors (an fp32 weight that needed
    # no cast): the module keeps its own copies, as after compile.
    own_weights(compiled, storages_of(state.values()),
                [engines[name].engine.snapshot for name in updated])
    for name in updated:
        forget_folded(engines[name].engine.snapshot)
        engines[name].engine.refit_plan()
        holder = getattr(engines[name], "handle", engines[name])
        # a deserialized engine, and the reference executor's CUDA graphs, hold the old weights
        holder._trt = holder._reference = None
    return sorted(updated)


def _warn_nonfinite(state: dict[str, torch.Tensor]) -> None:
    """A UserWarning naming the weights that hold NaN or inf (eager computes with them too,
    so it is no error; but a module that then returns NaN is a hunt without it)."""
    bad = []
    for name, value in state.items():
        if value.is_floating_point() and not bool(value.isfinite().all()):
            bad.append(f"{name} ({int((~value.isfinite()).sum())} of {value.numel()})")
    if bad:
        warnings.warn(f"refit: the new weights hold non-finite values (NaN/inf): "
                      f"{_names(bad)}; the module's outputs hold them where eager's do",
                      stacklevel=4)


def _state_dict(new_weights) -> dict[str, torch.Tensor]:
    if isinstance(new_weights, torch.nn.Module):
        return dict(new_weights.state_dict())
    if isinstance(new_weights, Mapping):
        bad = [k for k, v in new_weights.items() if not isinstance(v, torch.Tensor)]
        if bad:
            raise RefitError(f"state dict entries must be tensors; not: {bad[:5]}")
        return dict(new_weights)
    raise TypeError("refit takes an nn.Module or a state dict (name -> tensor), not "
                    f"{type(new_weights).__name__}")


def _check(program: WeightProgram, state: dict[str, torch.Tensor]) -> None:
    """Every expected entry present with its shape and kind of dtype; no unknown entry."""
    problems = []
    missing = [k for k in program.expected if k not in state]
    if missing:
        problems.append(f"missing keys: {_names(missing)}")
    extra = [k for k in state if k not in program.expected]
    if extra:
        named = [k + did_you_mean(k, missing) for k in extra]  # a typo of a missing key
        problems.append(f"unexpected keys (not in the compiled model): {_names(named)}")
    for name, (shape, dtype) in program.expected.items():
        value = state.get(name)
        if value is None:
            continue
        if tuple(value.shape) != shape:
            problems.append(f"{name}: shape {tuple(value.shape)} does not match the compiled "
                            f"shape {shape}")
        elif value.dtype != dtype and not (value.dtype.is_floating_point
                                           and dtype.is_floating_point):
            problems.append(f"{name}: dtype {value.dtype} cannot stand for the compiled "
                            f"{dtype} (floating-point weights are cast, others must match)")
    if problems:
        raise RefitError("the new weights do not fit the compiled module:\n  "
                         + "\n  ".join(problems))


def _names(keys: list[str], limit: int = 8) -> str:
    more = f" and {len(keys) - limit} more" if len(keys) > limit else ""
    return ", ".join(keys[:limit]) + more


def _set_engine_weight(layer, segment: str, layer_name: str, role: str,
                       value: torch.Tensor) -> None:
    old = layer.attrs[role]
    if old is None or old.numel() != value.numel() or old.dtype != value.dtype:
        raise RefitError(f"{segment}: layer {layer_name} {role} weights are "
                         f"{None if old is None else (old.numel(), old.dtype)}, the new "
                         f"ones {(value.numel(), value.dtype)}")
    layer.attrs[role] = value.detach().to(old.device).contiguous().reshape(-1)


def _set_attribute(root: torch.nn.Module, path: str, target: str,
                   value: torch.Tensor) -> None:
    module = root.get_submodule(path) if path else root
    *owner_path, name = target.split(".")
    owner = module.get_submodule(".".join(owner_path)) if owner_path else module
    old = getattr(owner, name)
    if old.shape != value.shape or old.dtype != value.dtype:
        raise RefitError(f"{path or 'module'}.{target}: compiled {tuple(old.shape)} "
                         f"{old.dtype}, new {tuple(value.shape)} {value.dtype}")
    value = value.detach().to(old.device)
    if name in owner._parameters:
        owner._parameters[name] = torch.nn.Parameter(value, requires_grad=old.requires_grad)
    elif name in owner._buffers:
        owner._buffers[name] = value
    else:
        setattr(owner, name, value)
