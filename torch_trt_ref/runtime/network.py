"""Public entry points of the reference executor: ``run_network`` runs a TensorRT network
(or its snapshot) on CPU tensors, and ``parse_onnx`` builds a network from an ONNX model
with TensorRT's own ONNX parser."""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .._trt import make_logger, trt
from .reference.executor import run_snapshot
from .snapshot import NetworkSnapshot, TensorInfo, take_snapshot


def run_network(network_or_snapshot, inputs: Mapping[str, Any] | Sequence[Any]
                ) -> dict[str, torch.Tensor]:
    """Run a ``trt.INetworkDefinition`` (snapshotted first) or a ``NetworkSnapshot`` on the
    reference executor. ``inputs`` maps input names to tensors (torch or numpy), or lists
    them in network input order. Returns the outputs by name, in network output order.

    Raises ValueError for unknown, missing or wrongly shaped inputs, TypeError for a wrong
    dtype (each names what the network accepts), NotImplementedError when the network uses
    a layer kind the reference executor has no function for."""
    snapshot = (network_or_snapshot if isinstance(network_or_snapshot, NetworkSnapshot)
                else take_snapshot(network_or_snapshot, {}))
    feeds = _feeds(snapshot.inputs, inputs)
    unsupported = snapshot.unsupported_kinds()
    if unsupported:
        raise NotImplementedError(
            f"the reference executor has no function for TensorRT layer kind(s) "
            f"{', '.join(unsupported)}")
    with torch.no_grad():
        return dict(zip(snapshot.outputs, run_snapshot(snapshot, feeds)))


def describe_inputs(infos: list[TensorInfo]) -> str:
    """``x: float32 (2, -1)`` per input; -1 is a dynamic dimension."""
    return ", ".join(f"{i.name}: {_dtype_name(i.dtype)} {i.shape}" for i in infos) or "none"


def _dtype_name(dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _feeds(infos: list[TensorInfo], inputs) -> dict[str, torch.Tensor]:
    accepted = f"the network's inputs are {describe_inputs(infos)}"
    if isinstance(inputs, Mapping):
        names = {i.name for i in infos}
        unknown = sorted(set(inputs) - names)
        missing = [i.name for i in infos if i.name not in inputs]
        if unknown or missing:
            raise ValueError(
                (f"unknown input(s) {', '.join(unknown)}; " if unknown else "")
                + (f"missing input(s) {', '.join(missing)}; " if missing else "") + accepted)
        values = [inputs[i.name] for i in infos]
    else:
        values = list(inputs)
        if len(values) != len(infos):
            raise ValueError(f"{len(values)} inputs given, the network takes {len(infos)}; "
                             f"{accepted}")
    return {info.name: _checked(info, value, accepted) for info, value in zip(infos, values)}


def _checked(info: TensorInfo, value, accepted: str) -> torch.Tensor:
    if isinstance(value, np.ndarray):
        value = torch.from_numpy(value)
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"input {info.name}: expected a torch.Tensor or numpy array, got "
                        f"{type(value).__name__}; {accepted}")
    if value.dtype != info.dtype:
        raise TypeError(f"input {info.name}: dtype {_dtype_name(value.dtype)}, the network "
                        f"takes {_dtype_name(info.dtype)}; {accepted}")
    shape = tuple(value.shape)
    if len(shape) != len(info.shape) or any(d >= 0 and d != s
                                            for d, s in zip(info.shape, shape)):
        raise ValueError(f"input {info.name}: shape {shape}, the network takes {info.shape} "
                         f"(-1: any size); {accepted}")
    return value


class OnnxParseError(ValueError):
    """TensorRT's ONNX parser rejected a model; the message lists the parser's errors."""


@dataclass
class OnnxNetwork:
    """A TensorRT network parsed from ONNX, with the builder and the parser it needs alive
    (the parser owns the weights of the model's initializers until they are copied)."""

    network: Any
    builder: Any
    parser: Any

    def snapshot(self) -> NetworkSnapshot:
        return take_snapshot(self.network, {})

    def builder_refuses(self) -> bool:
        """Whether TensorRT's builder refuses to build this network (no engine exists)."""
        config = self.builder.create_builder_config()
        with _quiet_native_output():
            return self.builder.build_serialized_network(self.network, config) is None


def parse_onnx(model) -> OnnxNetwork:
    """Parse ``model`` (a path, serialized bytes or an ``onnx.ModelProto``) with TensorRT's
    ONNX parser (``trt.OnnxParser``) into a strongly typed network."""
    if isinstance(model, (str, Path)):
        data = Path(model).read_bytes()
    elif isinstance(model, bytes):
        data = model
    else:
        data = model.SerializeToString()
    logger = make_logger()
    builder = trt.Builder(logger)
    network = builder.create_network(0)  # tensorrt_rtx networks are strongly typed
    parser = trt.OnnxParser(network, logger)
    with _quiet_native_output():
        ok = parser.parse(data)
    if not ok:
        raise OnnxParseError(_parser_errors(parser))
    return OnnxNetwork(network, builder, parser)


def _parser_errors(parser) -> str:
    errors = []  # distinct messages, in the parser's order
    for i in range(parser.num_errors):
        e = parser.get_error(i)
        where = f"node {e.node()} ({e.node_operator()})" if e.node() >= 0 else "model"
        desc = e.desc().strip().splitlines()[-1] if e.desc().strip() else ""
        if desc in ("", "false"):  # a failed check without a message: say which kind
            desc = str(e.code()).rsplit(".", 1)[-1]
        if f"{where}: {desc}" not in errors:
            errors.append(f"{where}: {desc}")
    return "; ".join(errors) or "the parser returned false without an error"


@contextlib.contextmanager
def _quiet_native_output():
    """The parser prints some diagnostics ("Unsupported ONNX data type") straight to the C
    stdout/stderr; its errors are read back through ``get_error`` instead."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        yield
    finally:
        ctypes.CDLL(None).fflush(None)  # what the C side buffered goes to /dev/null too
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, devnull):
            os.close(fd)
