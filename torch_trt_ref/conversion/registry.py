"""The converter registry (D3): ATen overload -> ``ConverterSupport`` entries, ordered by
priority. The partitioner and the interpreter ask it the same question (``select``)."""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Optional

import torch
from torch.fx import Node

from ..settings import CompilationSettings, op_name
from .symbols import has_dynamic_shapes, makers, unbacked_symbols

Validator = Callable[[Node, CompilationSettings], Optional[str]]
BUILTIN_PRIORITY = 0
USER_PRIORITY = 100


def _accept(node: Node, settings: CompilationSettings) -> Optional[str]:
    return None


@dataclass(frozen=True)
class ConverterSupport:
    """One registered converter and what it declares about itself."""

    target: Any
    implementation: Callable[..., Any]
    capability_validator: Validator = _accept
    supports_dynamic_shapes: bool = False
    requires_output_allocator: bool = False
    priority: int = BUILTIN_PRIORITY
    family: str = "misc"
    # Handles tensors whose sizes are unbacked symbols (data-dependent, e.g. the u0 of
    # nonzero's output) arriving as inputs: see symbols.unbacked_symbols.
    supports_unbacked_symbols: bool = False
    # Tensor arguments (schema names) the converter takes as torch.Tensor constants when
    # the graph passes one (convolution weights, a weight a matmul reads transposed); every
    # other constant tensor argument arrives as an ITensor (Note [Constant inputs]).
    constants: frozenset = frozenset()
    # Note [Converter preambles]: ``preamble(ctx, nodes)`` runs once per network before its
    # first layer, with every node of the segment this converter takes (TensorRT's ONNX
    # parser, through which a plugin layer is added, refuses a network that has layers).
    preamble: Optional[Callable[..., None]] = None

    @property
    def name(self) -> str:
        return op_name(self.target)

    def validate(self, node: Node, settings: CompilationSettings) -> Optional[str]:
        """None when this converter accepts ``node``, else the reason it does not.
        Validators may return a bool (True = accepted) or a reason string."""
        verdict = self.capability_validator(node, settings)
        if verdict is True or verdict is None:
            return None
        if verdict is False:
            return f"validator of {self.name} rejected this variant"
        return str(verdict)


@dataclass
class ConverterRegistry:
    """Converters by target; several per target are kept, highest priority first."""

    entries: dict[Any, list[ConverterSupport]] = field(default_factory=dict)
    preamble_targets: set = field(default_factory=set)  # Note [Converter preambles]

    def register(self, support: ConverterSupport) -> None:
        if support.preamble is not None:
            self.preamble_targets.add(support.target)
        bucket = self.entries.setdefault(support.target, [])
        bucket.append(support)
        bucket.sort(key=lambda s: -s.priority)

    def candidates(self, target: Any) -> list[ConverterSupport]:
        return self.entries.get(target, [])

    def __contains__(self, target: Any) -> bool:
        return target in self.entries

    def targets(self) -> list[Any]:
        return list(self.entries)

    def aten_overloads(self) -> list[torch._ops.OpOverload]:
        return [t for t in self.entries if isinstance(t, torch._ops.OpOverload)]

    def copy(self) -> "ConverterRegistry":
        return ConverterRegistry({k: list(v) for k, v in self.entries.items()},
                                 set(self.preamble_targets))

    def select(self, node: Node, settings: CompilationSettings
               ) -> tuple[ConverterSupport | None, str | None]:
        """The capability question (D3), asked alike by the partitioner and the
        interpreter: the highest-priority converter that accepts ``node``, or None and the
        reason none does (no converter; data-dependent or symbolic sizes it does not
        declare; its validator's reason)."""
        candidates = self.candidates(node.target)
        if not candidates:
            return None, f"no converter for {op_name(node.target)}"
        dynamic = has_dynamic_shapes(node)
        read, made = unbacked_symbols(node) if dynamic else (set(), set())
        reasons = []
        for support in candidates:
            # an op with an output allocator makes its own data-dependent sizes (nonzero's u0)
            needed = read if support.requires_output_allocator else read | made
            if needed and not support.supports_unbacked_symbols:
                reasons.append(_unbacked_reason(node, needed, support))
                continue
            if dynamic and not support.supports_dynamic_shapes \
                    and not settings.assume_dynamic_shape_support:
                reasons.append(f"converter of {support.name} does not support dynamic shapes")
                continue
            reason = support.validate(node, settings)
            if reason is None:
                return support, None
            reasons.append(reason)
        return None, "; ".join(dict.fromkeys(reasons))


def _unbacked_reason(node: Node, symbols: set, support: ConverterSupport) -> str:
    names = ", ".join(sorted(str(s) for s in symbols))
    made_by = makers(node, symbols)
    where = f", made by {', '.join(made_by)}" if made_by else ""
    return (f"its sizes depend on data (unbacked {names}{where}, no range to build for); "
            f"converter of {support.name} does not declare unbacked=True")


CONVERTERS = ConverterRegistry()


def converter(
    *targets: Any,
    validator: Validator | None = None,
    dynamic: bool = False,
    output_allocator: bool = False,
    priority: int = BUILTIN_PRIORITY,
    family: str | None = None,
    registry: ConverterRegistry | None = None,
    unbacked: bool = False,
    constants: Iterable[str] = (),
):
    """Register ``fn(ctx, **aten_args)`` as the converter of each target.

    ``validator(node, settings)`` returns None (or True) when the node is supported, else
    a short reason. ``dynamic`` declares symbolic-shape support; ``output_allocator`` marks
    data-dependent output shapes (the unbacked symbols the op itself makes); ``unbacked``
    declares that the converter handles data-dependent sizes anywhere in its inputs and
    outputs (without it such nodes run in PyTorch). ``constants`` names the Tensor
    arguments it wants as torch.Tensor constants where the graph has one; the others
    arrive as ITensors (Note [Constant inputs]). User converters pass a higher
    ``priority`` to override."""

    def wrap(fn):
        fam = family or fn.__module__.rsplit(".", 1)[-1]
        for target in targets:
            (registry or CONVERTERS).register(
                ConverterSupport(target, fn, validator or _accept, dynamic, output_allocator,
                                 priority, fam, unbacked, frozenset(constants))
            )
        return fn

    return wrap


# ---------------------------------------------------------------------------------------
# Argument normalization: ATen schema -> keyword arguments with schema defaults applied.

_SIGNATURES: dict[Any, inspect.Signature | None] = {}
_BINDERS: dict[Any, "_Binder | None"] = {}


def _signature(target: Any) -> inspect.Signature | None:
    if target not in _SIGNATURES:
        sig = None
        if isinstance(target, torch._ops.OpOverload):
            from torch.fx.operator_schemas import _torchscript_schema_to_signature

            sig = _torchscript_schema_to_signature(target._schema)
        _SIGNATURES[target] = sig
    return _SIGNATURES[target]


class _Binder:
    """An op's schema as the three things a bind needs: the positional names, every name in
    order, the defaults. Binding a node with it is a dict build; ``inspect.Signature.bind``
    + ``apply_defaults`` made the creation family's conversion 10% slower when its validator
    started reading arguments by name (the gate's A/B against 69d9405, issue 37). Any call
    it does not bind plainly (too many positionals, an unknown or doubled keyword, a missing
    argument) goes to ``Signature.bind``, which raises as before; tests/test_registry.py
    holds the two equal on 8 argument lists (mistakes among them) for every ATen overload
    the registry converts."""

    def __init__(self, sig: inspect.Signature):
        params = list(sig.parameters.values())
        self.sig = sig
        self.positional = tuple(p.name for p in params if p.kind in (
            p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))
        self.keywords = frozenset(p.name for p in params if p.kind in (
            p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))
        self.names = tuple(p.name for p in params)
        self.defaults = {p.name: p.default for p in params if p.default is not p.empty}

    def bind(self, args: tuple, kwargs: dict) -> dict:
        if len(args) <= len(self.positional):
            given = dict(zip(self.positional, args))
            for name, value in kwargs.items():
                if name in given or name not in self.keywords:
                    break
                given[name] = value
            else:
                try:
                    return {n: given[n] if n in given else self.defaults[n]
                            for n in self.names}
                except KeyError:  # a required argument is missing
                    pass
        return reference_bind(self.sig, args, kwargs)  # raises with Python's message


def reference_bind(sig: inspect.Signature, args: tuple, kwargs: dict) -> dict:
    """``Signature.bind`` with defaults applied: the slow route ``_Binder`` is held to."""
    bound = sig.bind(*args, **kwargs)
    bound.apply_defaults()
    return dict(bound.arguments)


def _binder(target: Any) -> "_Binder | None":
    if target not in _BINDERS:
        sig = _signature(target)
        plain = sig is not None and all(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD,
                                                   p.KEYWORD_ONLY)
                                        for p in sig.parameters.values())
        _BINDERS[target] = _Binder(sig) if plain else None
    return _BINDERS[target]


def normalize_arguments(target: Any, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """Bind ``args``/``kwargs`` to the op's schema. For ATen overloads every argument comes
    back by name with schema defaults filled in; Python callables keep positional args."""
    binder = _binder(target)
    if binder is not None:
        return (), binder.bind(args, kwargs)
    sig = _signature(target)
    if sig is None:
        return args, dict(kwargs)
    return (), reference_bind(sig, args, kwargs)


def node_args(node: Node) -> dict[str, Any]:
    """The node's ATen arguments by schema name, defaults applied, as converters receive
    them (ATen's ``self`` is ``input``); tensor arguments are fx Nodes. Validators and the
    direct lowering rewrites (``lowering.direct``) read their arguments here, never from
    ``node.args[i]``."""
    _, kwargs = normalize_arguments(node.target, node.args, node.kwargs)
    return kwargs
