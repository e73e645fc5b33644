"""The ``torch_tensorrt`` backend of the conformance suite (DESIGN D16): a graph is lowered,
support-checked, partitioned and converted by Torch-TensorRT's own pipeline
(``torch_tensorrt.dynamo.compile``: its decompositions, its partitioner's converter
support check, its ``TRTInterpreter`` and converters), and the INetworkDefinition its
converters built is read back with our snapshot reader and run on our reference executor
in place of the engine. No engine is built or run: Torch-TensorRT needs a GPU for that.

Import only in Torch-TensorRT's environment (``../shared/peer/setup.sh``). Importing this
module patches, before ``import torch_tensorrt``, the two GPU queries that import makes on a
machine without one (device capability, current device: the peer's README, P1/P2), and
replaces in ``torch_tensorrt.dynamo.conversion._conversion`` the two runtime steps that need
a GPU: ``interpret_module_to_result`` (builds the network as the peer does, then takes our
snapshot instead of building an engine) and ``TorchTensorRTModule`` (runs that snapshot on
our executor, with the peer's input and output conventions). Nothing on the compile path
is changed: every lowering pass, the support check, the partitioner and every converter
are the peer's own code. One placement is: the peer moves the subgraphs it leaves to
PyTorch to its target device (``to_torch_device(settings.device)``, cuda:0); here they stay
on the CPU, where the model and our executor run (``compile_program(whole_graph=False)``,
the zoo's partial compiles). Two costs are cut and nothing judged changes: the peer's
``deallocate_module`` frees GPU memory with a full ``gc.collect()`` (none is held here), and
torch's scan for the ops export may keep is reused while the dispatcher is unchanged."""

from __future__ import annotations

import logging
import re
import warnings
from types import SimpleNamespace
from typing import Any

import torch
from torch.export import exported_program as _exported_program

if not torch.cuda.is_available():  # P1/P2: only platform checks read these
    torch.cuda.get_device_capability = lambda device=None: (8, 9)
    torch.cuda.current_device = lambda: 0

import torch_tensorrt  # noqa: E402  (after the patches above)
from torch_tensorrt.dynamo import _compiler, partitioning  # noqa: E402
from torch_tensorrt.dynamo.conversion import _conversion  # noqa: E402
from torch_tensorrt.dynamo.conversion._TRTInterpreter import TRTInterpreter  # noqa: E402
from torch_tensorrt.dynamo.partitioning._global_partitioner import (  # noqa: E402
    TorchTensorRTOperatorSupport,
)

from torch_trt_ref.runtime.reference.executor import run_snapshot  # noqa: E402
from torch_trt_ref.runtime.snapshot import NetworkSnapshot, take_snapshot  # noqa: E402

VERSION = f"Torch-TensorRT {torch_tensorrt.__version__}, torch {torch.__version__}"


class SentToPyTorch(Exception):
    """The peer's support check leaves some ops of the graph to PyTorch (they would run
    eagerly, not in TensorRT): the cell is not converted. ``ops`` names them."""

    def __init__(self, ops: list[str]):
        super().__init__("the peer runs in PyTorch: " + ", ".join(ops))
        self.ops = ops


_original_support = partitioning.get_graph_converter_support
# whole_graph: a graph the peer does not support fully raises SentToPyTorch (conformance
# cells); support: the last support count (supported, total), read by the zoo's records
_STATE: dict[str, Any] = {"whole_graph": True, "support": None}


def _support(gm: torch.fx.GraphModule, torch_executed_ops: Any):
    """The peer's own support count; with ``whole_graph`` a graph it does not support fully
    stops here (``SentToPyTorch``), else its partitioner goes on and leaves the unsupported
    part to PyTorch on the CPU."""
    supported, total = _original_support(gm, torch_executed_ops)
    _STATE["support"] = (supported, total)
    if supported < total and _STATE["whole_graph"]:
        check = TorchTensorRTOperatorSupport(torch_executed_ops=set(torch_executed_ops))
        modules = dict(gm.named_modules())
        ops = sorted({str(n.target) for n in gm.graph.nodes if n.op == "call_function"
                      and not check.is_node_supported(modules, n)})
        raise SentToPyTorch(ops or [f"{total - supported} of {total} nodes"])
    return supported, total


def _interpret(module, inputs, settings=None, engine_cache=None):
    """``interpret_module_to_result`` up to the network: the peer's interpreter and
    converters build the INetworkDefinition; our snapshot of it stands for the engine."""
    output_dtypes = _conversion.infer_module_output_dtypes(
        module, truncate_double=settings.truncate_double)
    interpreter = TRTInterpreter(module, inputs, output_dtypes=output_dtypes,
                                 compilation_settings=settings)
    interpreter._construct_trt_network_def()
    _check_shapes(interpreter.ctx.net)
    try:
        snapshot = take_snapshot(interpreter.ctx.net, _weight_sources(interpreter.ctx))
    except Exception as err:
        raise SnapshotError(f"our snapshot reader failed on the peer's network: "
                            f"{type(err).__name__}: {err}") from err
    snapshot.node_converters = {n.name: str(n.target) for n in module.graph.nodes
                                if n.op == "call_function"}
    return SimpleNamespace(serialized_engine=snapshot,
                           input_names=list(interpreter._input_names),
                           output_names=list(interpreter._output_names),
                           requires_output_allocator=interpreter.ctx.requires_output_allocator,
                           requires_native_multidevice=False, symbolic_shape_expressions={})


_WEIGHT_ATTRS = {"CONSTANT": "weights", "KERNEL": "kernel", "BIAS": "bias", "SCALE": "scale",
                 "SHIFT": "shift", "POWER": "power"}


def _unkinded(name: str) -> str:
    """A layer name without its leading "[KIND]-": the peer names a deconvolution's kernel
    "[CONVOLUTION]-..." in its refit map while the layer is "[DECONVOLUTION]-..."."""
    return re.sub(r"^\[[A-Z_]+\]-", "", name)


def _weight_sources(ctx) -> dict[str, dict[str, torch.Tensor]]:
    """Layer name -> weight attribute -> the torch tensor the peer's converter passed to
    TensorRT, from the peer's refit map (keys "<layer name> <WEIGHT KIND>",
    ``converter_utils.to_trt_weights``). TensorRT hands bf16 weights back without a numpy
    view; the snapshot reader takes their values from these tensors instead."""
    by_name: dict[str, dict[str, torch.Tensor]] = {}
    for key, tensor in ctx.weight_refit_map.items():
        layer, _, kind = key.rpartition(" ")
        if kind in _WEIGHT_ATTRS and isinstance(tensor, torch.Tensor):
            by_name.setdefault(_unkinded(layer), {})[_WEIGHT_ATTRS[kind]] = tensor.contiguous()
    names = [ctx.net.get_layer(i).name for i in range(ctx.net.num_layers)]
    return {n: by_name[_unkinded(n)] for n in names if _unkinded(n) in by_name}


class SnapshotError(Exception):
    """Our snapshot reader could not read the peer's (valid) network: our bug, not theirs."""


class InvalidNetwork(Exception):
    """TensorRT cannot compute the shape of a layer the peer's converters added."""


def _check_shapes(net) -> None:
    for i in range(net.num_layers):
        layer = net.get_layer(i)
        for j in range(layer.num_outputs):
            try:
                len(layer.get_output(j).shape)
            except ValueError:
                raise InvalidNetwork(
                    f"TensorRT cannot compute the output shape of layer {layer.name} "
                    f"({str(layer.type).rsplit('.', 1)[-1]}): the peer's network is invalid "
                    "(TensorRT's API error is in the log)") from None


class SnapshotModule(torch.nn.Module):
    """Stands for the peer's ``TorchTensorRTModule``: runs the network snapshot on our
    reference executor with the peer's conventions (inputs in binding order, non-tensors
    made tensors; one output alone, several as a tuple)."""

    def __init__(self, serialized_engine: NetworkSnapshot | None = None,
                 input_binding_names=None, output_binding_names=None, *, name: str = "",
                 settings: Any = None, **_: Any):
        super().__init__()
        self.snapshot = serialized_engine
        self.input_binding_names = list(input_binding_names or [])
        self.output_binding_names = list(output_binding_names or [])
        self.name = name

    def set_output_tensors_as_unowned(self, enabled: bool) -> None:
        pass

    def setup_engine(self) -> None:
        pass

    def forward(self, *inputs):
        feeds = {name: x if isinstance(x, torch.Tensor) else torch.tensor(x)
                 for name, x in zip(self.input_binding_names, inputs)}
        with torch.no_grad():
            outs = dict(zip(self.snapshot.outputs, run_snapshot(self.snapshot, feeds)))
        values = [outs[n] for n in self.output_binding_names]
        return values[0] if len(values) == 1 else tuple(values)


def _offload_to_cpu(module: torch.nn.Module) -> None:
    """The peer's ``deallocate_module`` without its ``gc.collect()``: it moves the module's
    weights to the CPU and empties CUDA's cache so that TensorRT gets the GPU's memory. Here
    the weights are on the CPU already and no GPU memory is held, while a full collection
    walks the whole heap (torch's OpInfo database among it): 0.27 of the 0.46 CPU-s of a
    cell (measured 2026-11-29). Python's own collector still runs as usual."""
    module.to(torch.device("cpu"))


def _cached_cia_ops(collect):
    """torch's ``_collect_all_valid_cia_ops`` (the CompositeImplicitAutograd ops export may
    keep, looked up in every ``run_decompositions``: 0.04 CPU-s of a cell), reused while the
    two things its scan reads are unchanged: the op namespaces and the dispatcher's
    CompositeImplicitAutograd registrations (torch does not cache it because a custom op
    registered later adds to the latter; a new registration here makes a fresh scan)."""
    memo: dict[tuple, frozenset] = {}

    def cia_ops() -> set:
        key = (tuple(torch.ops._dir), tuple(
            torch._C._dispatch_get_registrations_for_dispatch_key("CompositeImplicitAutograd")))
        if key not in memo:
            memo.clear()
            memo[key] = frozenset(collect())
        return set(memo[key])

    cia_ops.uncached = collect
    return cia_ops


partitioning.get_graph_converter_support = _support
_conversion.interpret_module_to_result = _interpret
_conversion.TorchTensorRTModule = SnapshotModule
_compiler.to_torch_device = lambda device=None: torch.device("cpu")
_compiler.deallocate_module = _offload_to_cpu
_exported_program._collect_all_valid_cia_ops = _cached_cia_ops(
    _exported_program._collect_all_valid_cia_ops)


def peer_input(min_shape, opt_shape, max_shape, dtype: torch.dtype):
    """A ``torch_tensorrt.Input``: static when the three shapes agree."""
    if min_shape == opt_shape == max_shape:
        return torch_tensorrt.Input(shape=tuple(opt_shape), dtype=dtype)
    return torch_tensorrt.Input(min_shape=tuple(min_shape), opt_shape=tuple(opt_shape),
                                max_shape=tuple(max_shape), dtype=dtype)


def compile_program(ep, inputs: list, kwarg_inputs: dict | None = None, *,
                    whole_graph: bool = True, **settings: Any) -> torch.fx.GraphModule:
    """``torch_tensorrt.dynamo.compile`` of ``ep`` (min_block_size 1 unless ``settings``
    say otherwise, the peer's defaults for the rest), engines replaced by
    ``SnapshotModule``. With ``whole_graph`` it raises ``SentToPyTorch`` when the peer would
    leave any op to PyTorch; without, the peer partitions and ``support()`` tells how much
    it converted."""
    _STATE.update(whole_graph=whole_graph, support=None)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return torch_tensorrt.dynamo.compile(
                ep, arg_inputs=inputs, kwarg_inputs=kwarg_inputs, device="cuda:0",
                offload_module_to_cpu=True, **{"min_block_size": 1, **settings})
    finally:
        _STATE["whole_graph"] = True


def support() -> tuple[int, int] | None:
    """(supported, total) nodes of the last ``compile_program``'s graph, by the peer's own
    converter support check (None before one ran)."""
    return _STATE["support"]


def torch_segments(compiled: torch.fx.GraphModule) -> int:
    """Subgraphs the peer's partitioner left to PyTorch (its ``_run_on_gpu_*`` modules)."""
    return sum(1 for name, m in compiled.named_children()
               if isinstance(m, torch.fx.GraphModule) and not name.startswith("_run_on_acc"))


def snapshots(compiled: torch.fx.GraphModule) -> list[NetworkSnapshot]:
    """The network snapshots of a compiled module, one per TensorRT subgraph."""
    return [m.snapshot for m in compiled.modules() if isinstance(m, SnapshotModule)]


def converted_targets(compiled: torch.fx.GraphModule) -> set[str]:
    """The ops the peer's converters turned into TensorRT layers (its lowered graph's
    call_function targets, recorded per snapshot by ``_interpret``)."""
    return {t for s in snapshots(compiled) for t in s.node_converters.values()}


logging.getLogger("torch_tensorrt").setLevel(logging.ERROR)
