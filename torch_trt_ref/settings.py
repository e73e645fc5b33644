"""``CompilationSettings``: every knob of the compiler in one frozen, validated dataclass.
This is the only module that reads environment variables."""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
from dataclasses import dataclass, field
from typing import Any, Iterable

import torch

COMPILE_PRECISIONS = ("fp32", "fp16", "bf16")
# quantization formats: torch_trt_ref.quantize puts them in the graph before compile (D13)
QUANT_FORMATS = ("int8", "fp8", "nvfp4")
PARTITIONERS = ("fast", "global", "hierarchical", "dependency_aware")
EXECUTORS = ("auto", "reference", "tensorrt")
PRECISION_DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
ENGINE_MEMORY_MULTIPLIER = 4  # seed 002: per-engine budget = cpu_memory_budget // 4


def op_name(op: Any) -> str:
    """Canonical name of an op: ``aten.add.Tensor`` for an overload, ``aten.add`` for a
    packet or "aten::add"-style string, ``operator.getitem`` for a Python function."""
    if isinstance(op, torch._ops.OpOverload):
        return f"{op.namespace}.{op._schema.name.split('::')[1]}.{op._overloadname}"
    if isinstance(op, torch._ops.OpOverloadPacket):
        return f"{op._qualified_op_name.replace('::', '.')}"
    if isinstance(op, str):
        return op.replace("::", ".").removeprefix("torch.ops.")
    module = getattr(op, "__module__", None) or "builtins"
    module = {"_operator": "operator"}.get(module, module)
    return f"{module}.{getattr(op, '__name__', repr(op))}"


def _known_op(name: str) -> bool:
    parts = name.split(".")
    if parts[0] in ("operator", "builtins", "math", "_operator"):
        return True
    if len(parts) not in (2, 3):
        return False
    try:
        packet = getattr(getattr(torch.ops, parts[0]), parts[1])
    except (AttributeError, RuntimeError):
        return False
    return len(parts) == 2 or parts[2] in packet.overloads()


def normalize_ops(ops: Iterable[Any], what: str) -> frozenset[str]:
    """Validate and canonicalize a collection of ops given as OpOverload, OpOverloadPacket or
    "aten::add" / "aten.add.Tensor" strings."""
    if ops is None:
        return frozenset()
    if isinstance(ops, (str, torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        ops = [ops]
    accepted = ("Accepted: an OpOverload (torch.ops.aten.add.Tensor), an OpOverloadPacket "
                "(torch.ops.aten.add) or a string like 'aten::add' or 'aten.add.Tensor'")
    if not isinstance(ops, Iterable):
        raise ValueError(f"{what}: got {ops!r}, not a collection of ops. {accepted}")
    names = set()
    for op in ops:
        if not (isinstance(op, str) or callable(op)):
            raise ValueError(f"{what}: {op!r} is not an op. {accepted}")
        name = op_name(op)
        if not _known_op(name):
            aten_names = [n for n in dir(torch.ops.aten) if not n.startswith("_")]
            close = difflib.get_close_matches(name.split(".")[-1], aten_names, n=3)
            hint = f" Did you mean {', '.join('aten::' + c for c in close)}?" if close else ""
            raise ValueError(f"{what}: unknown op {op!r}. {accepted}.{hint}")
        names.add(name)
    return frozenset(names)


def matches_op(target: Any, names: frozenset[str]) -> bool:
    """True when ``target`` (an FX node target) is named by ``names`` as overload or packet."""
    if not names:
        return False
    name = op_name(target)
    return name in names or name.rsplit(".", 1)[0] in names


def normalize_modules(modules: Any) -> frozenset[str]:
    """``torch_executed_modules`` as names: a module class becomes its qualified type name
    ("torchvision.models.resnet.BasicBlock"); strings (a type name, qualified or not, or a
    submodule path such as "layer1.0") stay as given."""
    if isinstance(modules, (str, type)):
        modules = [modules]
    names = set()
    for m in modules:
        if isinstance(m, type) and issubclass(m, torch.nn.Module):
            names.add(f"{m.__module__}.{m.__qualname__}")
        elif isinstance(m, str) and m:
            names.add(m)
        else:
            raise ValueError(f"torch_executed_modules: {m!r} is not accepted; give nn.Module "
                             "classes, type names ('BasicBlock', 'torchvision.models.resnet."
                             "BasicBlock') or submodule paths ('layer1.0')")
    return frozenset(names)


def _backends(priority: Any, support_map: dict | None) -> tuple[str, ...]:
    """``backend_priority`` as a tuple of names (one string is one name): "tensorrt",
    "torch", a backend named in ``backend_support_map``, or a registered torch.compile
    backend (that runs its segments); a typo would silently take no op."""
    priority = (priority,) if isinstance(priority, str) else tuple(priority)
    known = {"tensorrt", "torch", *(support_map or {})}
    unknown = [b for b in priority if b not in known]
    if unknown:
        from torch._dynamo import list_backends  # only for names beyond ours: it is slow

        known |= set(list_backends(exclude_tags=()))
    for name in priority:
        if not isinstance(name, str) or name not in known:
            hint = did_you_mean(name, known) if isinstance(name, str) else ""
            raise ValueError(f"backend_priority: unknown backend {name!r}{hint}; accepted: "
                             "'tensorrt', 'torch', a key of backend_support_map or a "
                             "torch.compile backend (torch._dynamo.list_backends())")
    return priority


def _default_cpu_budget() -> int:
    env = os.environ.get("TORCH_TRT_REF_CPU_MEMORY_BUDGET")
    if env:
        return int(env)
    import psutil

    return int(psutil.virtual_memory().available)


def default_cache_dir() -> str:
    """The engine cache directory when ``cache_engines`` is set without a directory:
    $TORCH_TRT_REF_CACHE_DIR, else ~/.cache/torch_trt_ref/engines."""
    return os.environ.get("TORCH_TRT_REF_CACHE_DIR", os.path.join(
        os.path.expanduser("~"), ".cache", "torch_trt_ref", "engines"))


# How the reference executor replays an engine's prepared layers (runtime/reference/
# compiled_replay.py): "plain" calls torch op by op; "inductor" runs them compiled.
REPLAYS = ("plain", "inductor")


def default_cuda_graphs() -> dict:
    """The runtime's CUDA-graph defaults (runtime.cuda_graphs): capture on unless
    $TORCH_TRT_REF_CUDA_GRAPHS is 0/off/false/no; $TORCH_TRT_REF_CUDA_GRAPHS_CACHE graphs kept
    per engine or module (default 8); $TORCH_TRT_REF_REPLAY the replay (one of ``REPLAYS``,
    default plain)."""
    enabled = os.environ.get("TORCH_TRT_REF_CUDA_GRAPHS", "1").lower()
    replay = os.environ.get("TORCH_TRT_REF_REPLAY", "plain")
    if replay not in REPLAYS:
        raise ValueError(f"$TORCH_TRT_REF_REPLAY must be one of {', '.join(REPLAYS)}; got "
                         f"{replay!r}")
    return {"enabled": enabled not in ("0", "off", "false", "no"),
            "cache_size": int(os.environ.get("TORCH_TRT_REF_CUDA_GRAPHS_CACHE", "8")),
            "replay": replay}


@dataclass(frozen=True)
class CompilationSettings:
    """All compiler settings; validated on construction. Unknown names raise ValueError
    listing what is accepted."""

    precision: str = "fp32"
    partitioner: str = "fast"
    min_block_size: int = 5
    torch_executed_ops: frozenset[str] = frozenset()
    require_full_compilation: bool = False
    assume_dynamic_shape_support: bool = False
    enable_resource_partitioning: bool = False
    cpu_memory_budget: int | None = None
    backend_priority: tuple[str, ...] = ("tensorrt", "torch")
    backend_support_map: dict[str, frozenset[str]] | None = None
    executor: str = "auto"
    optimization_level: int = 3
    workspace_size: int = 0
    enabled_decompositions: frozenset[str] = frozenset()
    disabled_decompositions: frozenset[str] = frozenset()
    cache_engines: bool = False
    engine_cache_dir: str | None = None
    engine_cache_size: int = 4 * 1024**3
    progress: bool = False
    record_stack_traces: bool = False
    # submodules kept in PyTorch: types, or names of types ("torchvision.models.resnet.
    # BasicBlock", "BasicBlock") or qualified paths ("layer1.0"); see partitioning/modules.py
    torch_executed_modules: frozenset[str] = frozenset()
    # torch.compile backend: the max of a dynamic dim's profile when torch leaves it unbounded
    dynamic_max_size: int = 4096
    dryrun: bool = False  # lower and partition only: the plan, nothing converted or built
    # keep random ops (rand, randint, bernoulli, dropout in train mode) in PyTorch, so they
    # draw anew on every call; in an engine a draw is the same every call (docs/converters.md)
    random_ops_in_torch: bool = False
    # autocast (the peer's 2.10 spelling; lowering/autocast.py): in an fp32 compile, each
    # float node computes in autocast_low_precision_type unless a rule keeps it in fp32
    enable_autocast: bool = False
    autocast_low_precision_type: str = "fp16"
    autocast_excluded_nodes: frozenset[str] = frozenset()  # regexes: node name or module path
    autocast_excluded_ops: frozenset[str] = frozenset()
    autocast_max_output_threshold: float = 512.0
    # batches (a tensor or a tuple of positional tensors each) run eagerly to find the nodes
    # whose |output| exceeds the threshold; None: that rule is off
    autocast_calibration_dataloader: Any = field(default=None, compare=False)
    use_fp32_acc: bool = False  # matmuls of fp16/bf16 inputs accumulate (compute) in fp32
    # runtime.weight_streaming(module) may keep part of the engine weights off the device
    enable_weight_streaming: bool = False
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self):
        def one_of(name, value, accepted):
            if value not in accepted:
                hint = did_you_mean(value.lower(), accepted) if isinstance(value, str) else ""
                raise ValueError(f"{name}={value!r} is not accepted; use one of "
                                 f"{list(accepted)}{hint}")

        if self.precision in QUANT_FORMATS:
            raise ValueError(
                f"precision={self.precision!r} is not accepted; use one of "
                f"{list(COMPILE_PRECISIONS)}. "
                f"{self.precision!r} is a quantization format, put in the model before "
                f"compile: quantized = torch_trt_ref.quantize(model, calibration_batches, "
                f"precision={self.precision!r}), then compile(quantized, ...) "
                f"(docs/quantization.md; the zoo's `zoo run --precisions {self.precision}` "
                "does both)")
        one_of("precision", self.precision, COMPILE_PRECISIONS)
        one_of("partitioner", self.partitioner, PARTITIONERS)
        one_of("executor", self.executor, EXECUTORS)
        for name in ("min_block_size", "workspace_size", "engine_cache_size",
                     "dynamic_max_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"{name} must be a non-negative int, got {value!r}")
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.type == "bool" and not isinstance(value, bool):  # "no" would be true
                raise ValueError(f"{f.name} must be True or False, got {value!r}")
        level = self.optimization_level
        if not isinstance(level, int) or isinstance(level, bool) or not 0 <= level <= 5:
            raise ValueError(f"optimization_level must be an int in 0..5, got {level!r}")
        budget = self.cpu_memory_budget
        if budget is not None and (not isinstance(budget, int) or budget <= 0):
            raise ValueError(f"cpu_memory_budget must be a positive int of bytes, got {budget!r}")
        if budget is None and self.enable_resource_partitioning:
            object.__setattr__(self, "cpu_memory_budget", _default_cpu_budget())
        if self.engine_cache_dir is not None:
            if not isinstance(self.engine_cache_dir, (str, os.PathLike)):
                raise ValueError(f"engine_cache_dir must be a directory path (str or "
                                 f"os.PathLike), got {self.engine_cache_dir!r}")
            object.__setattr__(self, "cache_engines", True)
            if os.path.exists(self.engine_cache_dir) and not os.path.isdir(
                    self.engine_cache_dir):
                raise ValueError(f"engine_cache_dir={self.engine_cache_dir!r} is a file; "
                                 "give a directory (it is created when missing)")
        for name in ("torch_executed_ops", "enabled_decompositions", "disabled_decompositions"):
            object.__setattr__(self, name, normalize_ops(getattr(self, name), name))
        object.__setattr__(self, "torch_executed_modules",
                           normalize_modules(self.torch_executed_modules))
        if self.backend_support_map is not None:
            if not isinstance(self.backend_support_map, dict):
                raise ValueError(f"backend_support_map must be a dict of backend name -> ops, "
                                 f"got {type(self.backend_support_map).__name__}")
            object.__setattr__(
                self,
                "backend_support_map",
                {k: normalize_ops(v, f"backend_support_map[{k!r}]")
                 for k, v in self.backend_support_map.items()},
            )
        object.__setattr__(self, "backend_priority", _backends(self.backend_priority,
                                                              self.backend_support_map))
        self._check_autocast()
        if self.extra:
            raise ValueError(f"unknown settings {sorted(self.extra)}; accepted: {sorted(FIELDS)}")

    def _check_autocast(self) -> None:
        """The autocast settings: valid values, and only where they take effect."""
        for name in ("enable_autocast", "use_fp32_acc", "enable_weight_streaming"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be True or False, got {getattr(self, name)!r}")
        low = self.autocast_low_precision_type
        low = {torch.float16: "fp16", torch.bfloat16: "bf16"}.get(low, low)
        if low not in ("fp16", "bf16"):
            raise ValueError(f"autocast_low_precision_type={low!r} is not accepted; use 'fp16' "
                             "or 'bf16' (or torch.float16 / torch.bfloat16)")
        object.__setattr__(self, "autocast_low_precision_type", low)
        patterns = self.autocast_excluded_nodes
        patterns = [patterns] if isinstance(patterns, str) else list(patterns)
        for pattern in patterns:
            try:
                re.compile(pattern)
            except (re.error, TypeError) as err:
                raise ValueError(f"autocast_excluded_nodes: {pattern!r} is not a regular "
                                 f"expression ({err})") from None
        object.__setattr__(self, "autocast_excluded_nodes", frozenset(patterns))
        object.__setattr__(self, "autocast_excluded_ops",
                           normalize_ops(self.autocast_excluded_ops, "autocast_excluded_ops"))
        threshold = self.autocast_max_output_threshold
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not (
                threshold > 0):
            raise ValueError(f"autocast_max_output_threshold must be a positive number, got "
                             f"{threshold!r}")
        loader = self.autocast_calibration_dataloader
        if loader is not None and not hasattr(loader, "__iter__"):
            raise ValueError("autocast_calibration_dataloader must be an iterable of batches "
                             f"(a tensor or a tuple of tensors each), got {type(loader).__name__}")
        if self.enable_autocast and self.precision != "fp32":
            raise ValueError(f"enable_autocast chooses fp32 or {low} per node of an fp32 "
                             f"compile; use precision='fp32' (got {self.precision!r}) with "
                             f"autocast_low_precision_type={low!r}")
        given = [n for n in ("autocast_excluded_nodes", "autocast_excluded_ops",
                             "autocast_calibration_dataloader")
                 if getattr(self, n) not in (frozenset(), None)]
        if given and not self.enable_autocast:
            raise ValueError(f"{', '.join(given)} set without enable_autocast=True: autocast "
                             "settings take effect only with it")
        if self.use_fp32_acc and self.precision == "fp32" and not self.enable_autocast:
            raise ValueError("use_fp32_acc makes fp16/bf16 matmuls compute in fp32; it takes "
                             "precision='fp16'/'bf16' or enable_autocast=True")

    @property
    def autocast_dtype(self) -> torch.dtype:
        return PRECISION_DTYPES[self.autocast_low_precision_type]

    @classmethod
    def from_kwargs(cls, **kwargs) -> "CompilationSettings":
        """Build settings from keyword arguments, rejecting unknown names with the list of
        accepted ones (a typo must not be silently ignored)."""
        _reject_unknown(kwargs)
        return cls(**kwargs)

    def replace(self, **changes) -> "CompilationSettings":
        """A copy with ``changes``; unknown names are rejected as in ``from_kwargs``."""
        _reject_unknown(changes)
        return dataclasses.replace(self, **changes)

    @property
    def dtype(self) -> torch.dtype:
        return PRECISION_DTYPES[self.precision]

    @property
    def engine_cache_path(self) -> str | None:
        """The engine cache directory in use, or None when caching is off."""
        if not self.cache_engines:
            return None
        return self.engine_cache_dir or default_cache_dir()

    @property
    def engine_memory_budget(self) -> int | None:
        if self.cpu_memory_budget is None:
            return None
        return self.cpu_memory_budget // ENGINE_MEMORY_MULTIPLIER

    def engine_key_fields(self) -> dict[str, Any]:
        """The settings that change a built engine (part of the engine cache key)."""
        return {"precision": self.precision, "optimization_level": self.optimization_level,
                "workspace_size": self.workspace_size}


FIELDS = tuple(f.name for f in dataclasses.fields(CompilationSettings) if f.name != "extra")


def settings_json(settings: CompilationSettings) -> dict[str, Any]:
    """The settings as JSON data (frozensets as sorted lists): the compile report's copy."""
    out = {}
    for f in dataclasses.fields(settings):
        value = getattr(settings, f.name)
        if isinstance(value, frozenset):
            value = sorted(value)
        elif isinstance(value, dict):
            value = {k: sorted(v) if isinstance(v, frozenset) else v for k, v in value.items()}
        elif f.name == "autocast_calibration_dataloader" and value is not None:
            value = f"<{type(value).__name__}>"  # batches of tensors: not report data
        out[f.name] = value
    return out


def did_you_mean(name: str, accepted: Iterable[str], n: int = 1) -> str:
    """``" (did you mean 'x'?)"`` with the (at most ``n``) accepted names closest to
    ``name``, or "" when none is close: the hint of every unknown-name error."""
    close = difflib.get_close_matches(name, list(accepted), n=n)
    return f" (did you mean {' or '.join(map(repr, close))}?)" if close else ""


def _reject_unknown(names) -> None:
    """A ValueError naming every setting not in FIELDS, with the closest accepted name."""
    unknown = [key for key in names if key not in FIELDS]
    if unknown:
        hints = [f"{key!r}{did_you_mean(key, FIELDS)}" for key in unknown]
        raise ValueError(f"unknown settings {', '.join(hints)}; accepted: {sorted(FIELDS)}")
