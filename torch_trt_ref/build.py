"""Engine build with the real TensorRT builder: optimization profiles from the input specs,
serialized plan (streamed to disk, see ``engine_cache``) plus the metadata and network
snapshot the runtime needs (``runtime.engine.Engine``, also importable from here: programs
saved before it moved name it ``torch_trt_ref.build.Engine``). A cache hit with other weights
is refit, not rebuilt."""

from __future__ import annotations

import contextlib
import logging
import time
from typing import Callable, ContextManager

from ._trt import BACKEND, trt
from .conversion.interpreter import ConvertedNetwork
from .engine_cache import (
    EngineCache,
    PlanFile,
    build_to_anonymous_file,
    engine_key,
    stream_plan,
    weights_digest,
)
from .runtime.engine import Engine
from .runtime.refitter import PlanRefitError, plans_refittable
from .runtime.snapshot import NetworkSnapshot, take_snapshot
from .settings import CompilationSettings

log = logging.getLogger(__name__)


class EngineBuildError(RuntimeError):
    """The TensorRT builder returned no engine for a network."""


def build_engine(network: ConvertedNetwork, settings: CompilationSettings,
                 cache: EngineCache | None = None,
                 model_weights: set[tuple[str, str]] | None = None,
                 phase: Callable[[str], ContextManager] | None = None) -> Engine:
    """Build ``network`` into a serialized engine, or take it from ``cache`` when a network
    of the same structure was built before; raises EngineBuildError on failure.

    ``model_weights`` names the (layer, role) weights that come from the model (the refit
    outputs): the cache key leaves their values out, so a hit may hold other weights and
    is then refit (``Engine.cache_refit``). Every other weight (converter constants,
    indices) is part of the key. ``phase("build")`` (a report's phase) times the builder
    call alone."""
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
    count = max((len(spec.profiles) for spec in network.inputs), default=0)
    if count or any(spec.is_dynamic for spec in network.inputs):
        for k in range(max(count, 1)):  # one per Input(profiles=...) entry
            profile = builder.create_optimization_profile()
            for spec in network.inputs:
                profile.set_shape(spec.name, *spec.profile_range(k))
            config.add_optimization_profile(profile)
    start = time.perf_counter()
    with (phase or contextlib.nullcontext)("build"):
        if key:
            plan_file = cache.build(
                key, lambda file: stream_plan(builder, net, config, file,
                                              snapshot.weight_bytes()), weights=digest)
        else:
            plan_file = build_to_anonymous_file(builder, net, config, snapshot.weight_bytes())
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
