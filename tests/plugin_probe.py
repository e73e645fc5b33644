"""Run as a script by tests/test_plugin.py in a fresh process (it may abort): parse a
one-node ONNX model whose op is a Python ``IPluginCreatorV3One`` registered with TensorRT
for RTX, build the network CPU-only and print what came out (Note [Plugin layers in
TensorRT for RTX], torch_trt_ref/conversion/plugin.py). With the argument ``shim``
torch_trt_ref is imported first, which opens TensorRT's libraries through its folder of
links (Note [TensorRT for RTX through a folder of links], torch_trt_ref/_trt.py)."""

import sys

if sys.argv[1:] == ["shim"]:
    import torch_trt_ref  # noqa: F401

import tensorrt_rtx as trt  # noqa: E402
from onnx import TensorProto, helper

_NS, _NAME = "torch_trt_ref_probe", "Doubler"


class Doubler(trt.IPluginV3, trt.IPluginV3OneCore, trt.IPluginV3OneBuild,
              trt.IPluginV3OneRuntime):
    def __init__(self):
        for base in (trt.IPluginV3, trt.IPluginV3OneCore, trt.IPluginV3OneBuild,
                     trt.IPluginV3OneRuntime):
            base.__init__(self)
        self.num_outputs, self.plugin_namespace = 1, _NS
        self.plugin_name, self.plugin_version = _NAME, "1"
        self.timing_cache_id, self.metadata_string = "", ""

    def get_capability_interface(self, kind):
        return self

    def get_output_data_types(self, types):
        return [types[0]]

    def get_output_shapes(self, inputs, shape_inputs, builder):
        return [inputs[0]]

    def supports_format_combination(self, pos, in_out, num_inputs):
        desc = in_out[pos].desc
        return desc.format == trt.TensorFormat.LINEAR and desc.type == trt.float32

    def configure_plugin(self, inputs, outputs):
        pass

    def on_shape_change(self, inputs, outputs):
        pass

    def attach_to_context(self, context):
        return self.clone()

    def get_fields_to_serialize(self):
        return trt.PluginFieldCollection([])

    def set_tactic(self, tactic):
        pass

    def enqueue(self, *args):
        raise RuntimeError("the probe plugin is never run")

    def clone(self):
        return Doubler()


class Creator(trt.IPluginCreatorV3One):
    def __init__(self):
        trt.IPluginCreatorV3One.__init__(self)
        self.name, self.plugin_namespace, self.plugin_version = _NAME, _NS, "1"
        self.field_names = trt.PluginFieldCollection([])

    def create_plugin(self, name, fields, phase):
        return Doubler()


def main():
    creator = Creator()
    trt.get_plugin_registry().register_creator(creator, _NS)
    logger = trt.Logger(trt.Logger.ERROR)
    builder = trt.Builder(logger)
    net = builder.create_network(1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED))
    value = helper.make_tensor_value_info
    graph = helper.make_graph([helper.make_node(_NAME, ["x"], ["y"], domain=_NS)], "g",
                              [value("x", TensorProto.FLOAT, [2, 3])],
                              [value("y", TensorProto.FLOAT, [2, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid(_NS, 1)])
    parser = trt.OnnxParser(net, logger)
    print("parsed", parser.parse(model.SerializeToString()), flush=True)
    print("layers", [net.get_layer(i).type.name for i in range(net.num_layers)], flush=True)
    plan = builder.build_serialized_network(net, builder.create_builder_config())
    print("plan_bytes", 0 if plan is None else plan.nbytes, flush=True)


if __name__ == "__main__":
    main()
