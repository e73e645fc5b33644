"""``Engine``: a built engine as the runtime holds it — the serialized plan (on disk), the
network snapshot the reference executor replays, input specs and output names, and the
refit state. ``build.build_engine`` makes one; the runtime module runs one."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import torch

from .._trt import BACKEND
from ..conversion.shapes import TensorSpec
from ..engine_cache import PlanFile
from .refitter import plan_file_of, plans_refittable, refit_plan
from .snapshot import NetworkSnapshot


@dataclass
class Engine:
    """A built engine: the serialized plan (on disk) plus what is needed to run it."""

    plan_file: PlanFile
    inputs: list[TensorSpec]
    output_names: list[str]
    output_dtypes: list[torch.dtype]
    snapshot: NetworkSnapshot
    layer_count: int
    build_seconds: float
    backend: str = BACKEND
    requires_output_allocator: bool = False
    # parameter -> layers whose weights derive from it (the converters' record, completed
    # from the weight program: batch norm's folded scale lists weight, bias and statistics)
    refit_map: dict[str, list[str]] = field(default_factory=dict)
    converters_used: dict[str, int] = field(default_factory=dict)
    cache_hit: bool = False
    cache_refit: bool = False  # a cache hit whose plan held other weights: refit
    refittable: bool = False  # built with BuilderFlag.REFIT (see runtime/refitter.py)
    # False when the snapshot's weights were replaced (refit) but the plan could not be
    # refit here: the plan then still holds older weights and is never executed as is.
    plan_current: bool = True

    @property
    def plan(self) -> bytes:
        """The serialized plan, read from its file (see ``runnable_plan``)."""
        return self.plan_file.read()

    def runnable_plan(self) -> bytes:
        """The plan, refit first if its weights are older than the snapshot's; a clear
        error if it cannot be (a plan is never executed with stale weights)."""
        if not self.plan_current:
            if not self.refittable:
                raise RuntimeError(
                    "this engine's weights were refit where TensorRT could not run, and its "
                    "plan was built without BuilderFlag.REFIT, so the plan still holds the "
                    "old weights; use executor='reference' or recompile on this machine")
            self.refit_plan()
        return self.plan

    def refit_plan(self) -> None:
        """Put the snapshot's weights into the plan with TensorRT's Refitter where it can
        run; elsewhere mark the plan stale (``plan_current``)."""
        if self.refittable and plans_refittable():
            self.plan_file = plan_file_of(refit_plan(self.plan, self.snapshot))
            self.plan_current = True
        else:
            self.plan_current = False

    @cached_property
    def aliases(self) -> dict[str, str]:
        """Output name -> the input whose memory it shares: each KV-cache update layer whose
        output is an engine output writes its cache input in place (DESIGN D15). Read on
        every call and the layers never change, so it is found once: the scan of every
        layer made each call of lgamma_graph's module 10 us (14%) slower (the gate's A/B
        against 69d9405, bisected to f85f19b)."""
        inputs = {info.name for info in self.snapshot.inputs}
        return {layer.outputs[0].name: layer.inputs[0] for layer in self.snapshot.layers
                if layer.kind == "KV_CACHE_UPDATE" and layer.inputs[0] in inputs
                and layer.outputs[0].name in self.snapshot.outputs}

    @cached_property
    def profile_count(self) -> int:
        """How many optimization profiles the engine was built with (Input(profiles=...))."""
        return max((len(spec.profiles) for spec in self.inputs), default=0) or 1

    @cached_property
    def _static_shapes(self) -> list[tuple[int, ...]] | None:
        """The input shapes when every input is static and there is one profile, else None."""
        if self.profile_count != 1 or any(spec.is_dynamic for spec in self.inputs):
            return None
        return [tuple(spec.min_shape) for spec in self.inputs]

    def choose_profile(self, shapes: list[tuple[int, ...]], requested: int | str = "auto",
                       name: str = "engine") -> int:
        """The optimization profile that runs inputs of ``shapes``: ``requested`` (an index)
        when its ranges hold them, or with "auto" the first profile whose ranges do; a
        clear error naming the profiles otherwise."""
        if shapes == self._static_shapes and requested in ("auto", 0):
            return 0  # every input static, one profile: one list comparison per call
        count = self.profile_count
        if requested != "auto" and not (isinstance(requested, int) and 0 <= requested < count):
            raise ValueError(f"{name}: optimization profile {requested!r} does not exist; the "
                             f"engine has {count} (indices 0..{count - 1}) or 'auto'")
        candidates = range(count) if requested == "auto" else [requested]
        for k in candidates:
            if all(_holds(spec.profile_range(k), shape)
                   for spec, shape in zip(self.inputs, shapes)):
                return k
        if count == 1:
            for spec, shape in zip(self.inputs, shapes):
                if not spec.contains(shape):
                    raise ValueError(
                        f"{name}: input {spec.name} has shape {shape}, outside the compiled "
                        f"range min={spec.min_shape} max={spec.max_shape}; recompile with an "
                        "Input(min_shape, opt_shape, max_shape) that covers it")
        described = "; ".join(
            f"profile {k}: " + ", ".join(
                f"{spec.name} min={spec.profile_range(k)[0]} max={spec.profile_range(k)[2]}"
                for spec in self.inputs if spec.is_dynamic)
            for k in candidates)
        got = ", ".join(f"{spec.name}={shape}" for spec, shape in zip(self.inputs, shapes))
        which = "any optimization profile" if requested == "auto" else f"profile {requested}"
        raise ValueError(f"{name}: input shapes {got} are outside {which} ({described}); "
                         "pick another profile (runtime.optimization_profile) or recompile "
                         "with Input(profiles=[...]) covering them")

    @property
    def nbytes(self) -> int:
        return self.plan_file.nbytes

    def summary(self) -> dict[str, Any]:
        return {"inputs": [s.to_json() for s in self.inputs], "outputs": self.output_names,
                "layers": self.layer_count, "plan_bytes": self.nbytes,
                "weight_bytes": self.snapshot.weight_bytes(),
                "build_seconds": round(self.build_seconds, 3), "backend": self.backend,
                "cache_hit": self.cache_hit, "cache_refit": self.cache_refit,
                "refittable": self.refittable, "plan_current": self.plan_current,
                "profiles": self.profile_count, "aliases": self.aliases}


def _holds(bounds: tuple[tuple[int, ...], ...], shape: tuple[int, ...]) -> bool:
    lo, _, hi = bounds
    return len(shape) == len(lo) and all(a <= d <= c for d, a, c in zip(shape, lo, hi))
