"""Engine build with the real TensorRT builder: optimization profile from the input specs,
serialized plan (streamed to disk, see ``engine_cache``) plus the metadata and network
snapshot the runtime needs. A cache hit with other weights is refit, not rebuilt."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from ._trt import BACKEND, trt
from .conversion.interpreter import ConvertedNetwork
from .conversion.shapes import TensorSpec
from .engine_cache import (
    EngineCache,
    PlanFile,
    build_to_anonymous_file,
    engine_key,
    stream_plan,
    weights_digest,
)
from .runtime.refitter import PlanRefitError, plan_file_of, plans_refittable, refit_plan
from .runtime.snapshot import NetworkSnapshot, take_snapshot
from .settings import CompilationSettings

log = logging.getLogger(__name__)


class EngineBuildError(RuntimeError):
    """The TensorRT builder returned no engine for a network."""


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

    @property
    def nbytes(self) -> int:
        return self.plan_file.nbytes

    def summary(self) -> dict[str, Any]:
        return {"inputs": [s.to_json() for s in self.inputs], "outputs": self.output_names,
                "layers": self.layer_count, "plan_bytes": self.nbytes,
                "weight_bytes": self.snapshot.weight_bytes(),
                "build_seconds": round(self.build_seconds, 3), "backend": self.backend,
                "cache_hit": self.cache_hit, "cache_refit": self.cache_refit,
                "refittable": self.refittable, "plan_current": self.plan_current}


def build_engine(network: ConvertedNetwork, settings: CompilationSettings,
                 cache: EngineCache | None = None,
                 model_weights: set[tuple[str, str]] | None = None) -> Engine:
    """Build ``network`` into a serialized engine, or take it from ``cache`` when a network
    of the same structure was built before; raises EngineBuildError on failure.

    ``model_weights`` names the (layer, role) weights that come from the model (the refit
    outputs): the cache key leaves their values out, so a hit may hold other weights and
    is then refit (``Engine.cache_refit``). Every other weight (converter constants,
    indices) is part of the key."""
    builder, net = network.builder, network.net
    snapshot = take_snapshot(net, network.ctx.weight_sources)
    snapshot.node_outputs, snapshot.node_converters = network.node_outputs, network.node_converters
    refittable = plans_refittable()
    model_weights = model_weights or set()
    fields = {**settings.engine_key_fields(), "refittable": refittable}
    key = engine_key(snapshot, network.inputs, fields, model_weights) if cache else None
    digest = weights_digest(snapshot, model_weights) if key else None
    plan_file = cache.lookup(key) if key else None
    if plan_file is not None:
        engine = _engine(network, snapshot, plan_file, 0.0, cache_hit=True)
        engine.refittable = refittable
        if cache.entry_weights(key) == digest:
            return engine
        try:  # same structure, other weights
            engine.cache_refit = True
            engine.refit_plan()
            return engine
        except PlanRefitError as err:
            log.warning("engine cache: refit of a cached plan failed (%s); rebuilding", err)
    config = builder.create_builder_config()
    if refittable:
        config.set_flag(trt.BuilderFlag.REFIT)
    config.builder_optimization_level = settings.optimization_level
    if settings.workspace_size:
        config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, settings.workspace_size)
    if any(spec.is_dynamic for spec in network.inputs):
        profile = builder.create_optimization_profile()
        for spec in network.inputs:
            profile.set_shape(spec.name, spec.min_shape, spec.opt_shape, spec.max_shape)
        config.add_optimization_profile(profile)
    start = time.perf_counter()
    if key:
        plan_file = cache.build(key, lambda file: stream_plan(builder, net, config, file),
                                weights=digest)
    else:
        plan_file = build_to_anonymous_file(builder, net, config)
    seconds = time.perf_counter() - start
    if plan_file is None:
        raise EngineBuildError(
            f"TensorRT ({BACKEND}) could not build an engine for a network of {net.num_layers} "
            "layers: " + ("; ".join(network.logger.errors[-3:]) or "no error was logged"))
    engine = _engine(network, snapshot, plan_file, seconds)
    engine.refittable = refittable
    return engine


def _engine(network: ConvertedNetwork, snapshot: NetworkSnapshot, plan_file: PlanFile,
            seconds: float, cache_hit: bool = False) -> Engine:
    return Engine(
        plan_file=plan_file, inputs=network.inputs, output_names=network.output_names,
        output_dtypes=network.output_dtypes, snapshot=snapshot,
        layer_count=network.net.num_layers, build_seconds=seconds,
        requires_output_allocator=network.requires_output_allocator,
        refit_map=dict(network.ctx.refit_map), converters_used=dict(network.converters_used),
        cache_hit=cache_hit)
