"""Plan refit with TensorRT's ``Refitter``: new weights into a serialized, refittable plan
without running the builder.

Note [Refit on a machine without a GPU]: measured with tensorrt_rtx 1.7.1 on a CPU-only
machine, the builder fails (Myelin: ``CHECK(status == CUDA_SUCCESS)``) for
``BuilderFlag.REFIT``, ``REFIT_IDENTICAL``, ``STRIP_PLAN`` and for ``REFIT_INDIVIDUAL`` with
any weight marked refittable; and ``Runtime.deserialize_cuda_engine`` fails ("CUDA driver
version is insufficient"), so ``Refitter``, which takes a deserialized engine, cannot run
either. Plans are therefore built refittable only where the TensorRT executor can run
(``plans_refittable``); elsewhere a refit updates the network snapshot (what the reference
executor runs) and marks the plan stale, and a stale plan is never executed.
"""

from __future__ import annotations

import tempfile

from .._trt import make_logger, to_trt_dtype, trt
from ..engine_cache import PlanFile
from .trt_executor import tensorrt_unavailable_reason

# snapshot weight attribute -> TensorRT's WeightsRole
_ROLES = {"kernel": trt.WeightsRole.KERNEL, "bias": trt.WeightsRole.BIAS,
          "weights": trt.WeightsRole.CONSTANT, "scale": trt.WeightsRole.SCALE,
          "shift": trt.WeightsRole.SHIFT}
_ATTRS = {role: attr for attr, role in _ROLES.items()}


class PlanRefitError(RuntimeError):
    """TensorRT could not refit a plan."""


def plans_refittable() -> bool:
    """Whether engines are built with ``BuilderFlag.REFIT`` here (Note [Refit on a machine
    without a GPU])."""
    return tensorrt_unavailable_reason() is None


def refit_plan(plan: bytes, snapshot) -> bytes:
    """``plan`` with every refittable weight replaced by the snapshot's weight of the same
    layer and role; the serialized result. Needs a GPU the TensorRT runtime supports."""
    reason = tensorrt_unavailable_reason()
    if reason is not None:
        raise PlanRefitError(f"a plan can only be refit where TensorRT runs: {reason}")
    logger = make_logger()
    engine = trt.Runtime(logger).deserialize_cuda_engine(plan)
    if engine is None:
        raise PlanRefitError("TensorRT could not deserialize the plan to refit it")
    refitter = trt.Refitter(engine, logger)
    layers = {layer.name: layer for layer in snapshot.layers}
    keepalive = []
    names, roles = refitter.get_all()
    for name, role in zip(names, roles):
        layer = layers.get(name)
        value = layer.attrs.get(_ATTRS.get(role, "")) if layer is not None else None
        if value is None:
            raise PlanRefitError(f"the plan's weights {name} ({role.name}) have no value in "
                                 "the network snapshot")
        value = value.detach().cpu().contiguous()
        keepalive.append(value)
        weights = trt.Weights(to_trt_dtype(value.dtype), value.data_ptr(), value.numel())
        if not refitter.set_weights(name, role, weights):
            raise PlanRefitError(f"TensorRT refused the weights of {name} ({role.name}): "
                                 + "; ".join(getattr(logger, "errors", [])[-2:]))
    if not refitter.refit_cuda_engine():
        missing = refitter.get_missing()
        raise PlanRefitError(f"TensorRT could not refit the plan; missing weights: {missing}")
    return bytes(engine.serialize())


def plan_file_of(data: bytes):
    """An anonymous on-disk ``PlanFile`` holding ``data`` (a refit plan)."""
    file = tempfile.TemporaryFile(prefix="torch_trt_ref_plan_")
    file.write(data)
    file.flush()
    return PlanFile(file, len(data))
