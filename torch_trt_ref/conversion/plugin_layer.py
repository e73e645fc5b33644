"""The plugin layer of a custom op: a Python ``IPluginV3`` (``TorchOpPlugin``) whose fields
name the op, the module that defines it, its non-tensor arguments and how its output
shapes follow from its inputs (read from the op's fake kernel), added to a network through
TensorRT's ONNX parser (Note [Plugin layers in TensorRT for RTX], plugin.py)."""

from __future__ import annotations

import json

import numpy as np
import torch

from .._trt import to_trt_dtype, trt

try:
    import onnx
    from onnx import helper
except ImportError:  # the plugin path says so (plugin.py)
    onnx = helper = None

NAMESPACE, NAME, VERSION = "torch_trt_ref", "TorchOp", "1"
_FIELDS = ("op", "module", "spec")
# torch dtype name -> ONNX element type, for the one-node model the parser reads
ONNX_TYPES = {"float32": 1, "uint8": 2, "int8": 3, "int32": 6, "int64": 7, "bool": 9,
               "float16": 10, "bfloat16": 16}


class TorchOpPlugin(trt.IPluginV3, trt.IPluginV3OneCore, trt.IPluginV3OneBuild,
                    trt.IPluginV3OneRuntime):
    """One custom op call. ``spec`` (JSON): ``args`` (non-tensor arguments by name),
    ``tensors`` (the schema names of the tensor inputs, in input order), ``in_dtypes`` /
    ``out_dtypes`` (torch dtype names) and ``shapes``: per output, per dim, ``["c", n]``
    (a constant) or ``["in", i, j]`` (dim j of input i)."""

    def __init__(self, op: str, module: str, spec: str):
        for base in (trt.IPluginV3, trt.IPluginV3OneCore, trt.IPluginV3OneBuild,
                     trt.IPluginV3OneRuntime):
            base.__init__(self)
        self.op_name, self.op_module, self.op_spec = op, module, spec
        self.spec = json.loads(spec)
        self.num_outputs = len(self.spec["out_dtypes"])
        self.plugin_namespace, self.plugin_name, self.plugin_version = NAMESPACE, NAME, VERSION
        self.timing_cache_id, self.metadata_string = "", op

    def get_capability_interface(self, kind):
        return self

    def get_output_data_types(self, input_types):
        return [_trt_dtype(d) for d in self.spec["out_dtypes"]]

    def get_output_shapes(self, inputs, shape_inputs, builder):
        outputs = []
        for dims in self.spec["shapes"]:
            exprs = trt.DimsExprs(len(dims))
            for k, dim in enumerate(dims):
                exprs[k] = (builder.constant(dim[1]) if dim[0] == "c"
                            else inputs[dim[1]][dim[2]])
            outputs.append(exprs)
        return outputs

    def supports_format_combination(self, pos, in_out, num_inputs):
        dtypes = self.spec["in_dtypes"] + self.spec["out_dtypes"]
        desc = in_out[pos].desc
        return desc.format == trt.TensorFormat.LINEAR and desc.type == _trt_dtype(dtypes[pos])

    def configure_plugin(self, inputs, outputs):
        pass

    def on_shape_change(self, inputs, outputs):
        pass

    def attach_to_context(self, context):
        return self.clone()

    def set_tactic(self, tactic):
        pass

    def enqueue(self, input_desc, output_desc, inputs, outputs, workspace, stream):
        raise NotImplementedError(f"plugin layer of {self.op_name}: the TensorRT executor "
                                  "cannot run it yet; the reference executor calls the op")

    def get_fields_to_serialize(self):
        return trt.PluginFieldCollection([_field(n, getattr(self, f"op_{n}" if n != "op"
                                                            else "op_name"))
                                          for n in _FIELDS])

    def clone(self):
        return TorchOpPlugin(self.op_name, self.op_module, self.op_spec)


class TorchOpCreator(trt.IPluginCreatorV3One):
    def __init__(self):
        trt.IPluginCreatorV3One.__init__(self)
        self.name, self.plugin_namespace, self.plugin_version = NAME, NAMESPACE, VERSION
        self.field_names = trt.PluginFieldCollection(
            [trt.PluginField(n, np.array([], np.int8), trt.PluginFieldType.CHAR)
             for n in _FIELDS])

    def create_plugin(self, name, fields, phase):
        values = {f.name: bytes(np.asarray(f.data, np.int8)).decode().rstrip("\x00")
                  for f in fields}
        return TorchOpPlugin(values["op"], values["module"], values["spec"])


_CREATOR: list[TorchOpCreator] = []  # registered once per process, kept alive here


def register_creator() -> None:
    if not _CREATOR:
        creator = TorchOpCreator()
        if not trt.get_plugin_registry().register_creator(creator, NAMESPACE):
            raise RuntimeError(f"a plugin creator {NAMESPACE}::{NAME} is already registered")
        _CREATOR.append(creator)


def add_plugin_layers(net, calls: list[tuple[str, str, dict, list[int]]], keep: list) -> list:
    """One PLUGIN_V3 layer per call ``(op, module, spec, input ranks)``, added to the empty
    ``net`` by parsing a model of one node per call with TensorRT's ONNX parser (it refuses
    a network that has layers: Note [Converter preambles]). Each layer reads placeholder
    constants until ``wire`` connects it; returns the layers. ``keep`` holds the parser
    (which owns the placeholders' weights) alive as long as the network.

    Note [Plugin placeholders]: the node's inputs are ONNX initializers (one element per
    dim), not graph inputs. A network input the parser made cannot be taken out again:
    ``remove_tensor`` drops it from the inputs, and the builder then fails its own sanity
    check ("Tensor ... should have been removed from Graph::tensors"). A constant left
    without readers is harmless (the builder drops it; the reference executor runs it)."""
    register_creator()
    nodes, constants, outputs = [], [], []
    for k, (op, module, spec, ranks) in enumerate(calls):
        names = [f"__plugin{k}_in{i}" for i in range(len(ranks))]
        outs = [f"__plugin{k}_out{i}" for i in range(len(spec["out_dtypes"]))]
        nodes.append(helper.make_node(NAME, names, outs, domain=NAMESPACE, op=op,
                                      module=module, spec=json.dumps(spec)))
        constants += [helper.make_tensor(n, ONNX_TYPES[d], [1] * rank, [0])
                      for n, d, rank in zip(names, spec["in_dtypes"], ranks)]
        outputs += [helper.make_tensor_value_info(n, ONNX_TYPES[d], None)
                    for n, d in zip(outs, spec["out_dtypes"])]
    graph = helper.make_graph(nodes, "plugins", [], outputs, initializer=constants)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid(NAMESPACE, 1)])
    parser = trt.OnnxParser(net, trt.Logger(trt.Logger.ERROR))
    keep.append(parser)
    if not parser.parse(model.SerializeToString()):
        errors = "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
        raise RuntimeError(f"TensorRT's ONNX parser did not add the plugin layers: {errors}")
    layers = [net.get_layer(i) for i in range(net.num_layers)]
    layers = [la for la in layers if la.type == trt.LayerType.PLUGIN_V3]
    if len(layers) != len(calls):
        raise RuntimeError(f"TensorRT's ONNX parser added {len(layers)} plugin layers for "
                           f"{len(calls)} plugin calls")
    return layers


def wire(net, layer, inputs: list) -> list:
    """Connect ``layer`` to the network tensors ``inputs`` in place of its placeholders
    (Note [Plugin placeholders]) and unmark its outputs; returns them."""
    for i, tensor in enumerate(inputs):
        layer.set_input(i, tensor)
    outputs = [layer.get_output(i) for i in range(layer.num_outputs)]
    for tensor in outputs:
        net.unmark_output(tensor)
    return outputs


def _field(name: str, text: str):
    return trt.PluginField(name, np.frombuffer(text.encode(), np.int8).copy(),
                           trt.PluginFieldType.CHAR)


def _trt_dtype(name: str):
    return to_trt_dtype(getattr(torch, name))
