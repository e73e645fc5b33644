"""Precision as a lowering step (D6, first cut): cast weights, float inputs and float
factory ops to the target dtype, cast outputs back to the caller's dtypes. Ops with no
reduced-precision kernel (FFTs: neither TensorRT nor torch's CPU FFT takes half types) run
in fp32, and the real values leaving their complex results return to the target dtype.
A graph whose weights and float inputs are all in the target dtype already is left as
traced (Note [A model already in the compile precision])."""

from __future__ import annotations

import operator

import torch
from torch.fx import GraphModule

from ..settings import CompilationSettings
from ..weights import traced

aten = torch.ops.aten
FLOATS = (torch.float32, torch.float16, torch.bfloat16, torch.float64)
# Ops computed in fp32 whatever the precision (torch has no half FFT on CPU; TensorRT has
# no FFT, so these always run in PyTorch).
FULL_PRECISION_OPS = {aten._fft_r2c.default, aten._fft_c2r.default, aten._fft_c2c.default}


def _is_float(val) -> bool:
    return isinstance(val, torch.Tensor) and val.dtype in FLOATS


def _is_complex(val) -> bool:
    return isinstance(val, torch.Tensor) and val.dtype.is_complex


def _clamp_scalar(value, dtype):
    if isinstance(value, float):
        info = torch.finfo(dtype)
        return max(min(value, info.max), info.min)
    return value


def _compute_in_fp32(graph, node) -> None:
    """Cast ``node``'s real float inputs to fp32 (its output is complex or cast back by
    its consumers, see ``_back_to_target_from_complex``)."""
    def up(arg):
        if isinstance(arg, torch.fx.Node) and _is_float(arg.meta.get("val")):
            with graph.inserting_before(node):
                return graph.call_function(aten._to_copy.default, (arg,),
                                           {"dtype": torch.float32})
        return arg
    node.args = tuple(up(a) for a in node.args)


def _back_to_target_from_complex(graph, node, target) -> None:
    """A real float computed from a complex value (``abs``, ``view_as_real``) returns to
    the target precision."""
    if not _is_float(node.meta.get("val")) or not any(
            _is_complex(a.meta.get("val")) for a in node.all_input_nodes):
        return
    with graph.inserting_after(node):
        cast = graph.call_function(aten._to_copy.default, (node,), {"dtype": target})
    node.replace_all_uses_with(cast, delete_user_cb=lambda u: u is not cast)


def _cast_view(value: torch.Tensor, target: torch.dtype, storages: dict) -> torch.Tensor:
    """``value`` in ``target``, as the same view of its storage cast once: tied weights and
    the views lowering keeps of a weight (a transposed head, split rows) stay views of one
    cast tensor, so the network still holds each weight once."""
    storage = value.untyped_storage()
    key = (storage.data_ptr(), value.dtype)
    with traced():  # refit replays the cast (Note [Weight program] in torch_trt_ref.weights)
        if key not in storages:
            whole = torch.as_strided(value, (storage.nbytes() // value.element_size(),), (1,), 0)
            storages[key] = whole.detach().to(target)
        return storages[key].as_strided(value.shape, value.stride(), value.storage_offset())


# Note [A model already in the compile precision]: a model its user cast (``model.half()``,
# as ``llm.compile`` casts a decoder before tracing it in its cache's dtype) holds explicit
# upcasts: RMSNorm's statistics (and Gemma's ``1 + weight`` scale) and rotary angles are
# computed in float32 and cast back. Eager fp16 keeps those in float32, and the float64 rule
# measures us against eager's error. Rewriting them to fp16, as this pass rewrites an fp32
# model (where every float32 is the model's dtype, not a choice), failed a 2-layer Gemma3's
# fp16 decode step 94 of 128: its post-feedforward RMSNorm reads |x| ~5e-4, whose squares
# (~1e-7..1e-6) lie below fp16's smallest normal (6.1e-5), so the statistics lost their bits
# (our logits' RMSE 3x eager fp16's at the median step; docs/llm.md). So when every weight
# (constants folded from weights aside: fold_constants computed them in the dtypes the model
# asked for) and every float input is of the target dtype, the graph is left as traced.


def in_precision_already(gm: GraphModule, target: torch.dtype) -> bool:
    """True when every float weight (not a folded constant) and float input of ``gm`` is of
    ``target`` (Note [A model already in the compile precision])."""
    dtypes = set()
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            value = node.meta.get("val")
        elif node.op == "get_attr" and not node.meta.get("folded"):
            value = operator.attrgetter(node.target)(gm)
        else:
            continue
        if _is_float(value):
            dtypes.add(value.dtype)
    return dtypes == {target}


def cast_precision(gm: GraphModule, settings: CompilationSettings) -> GraphModule:
    """Rewrite the graph to compute in ``settings.dtype``.

    Before: ``x: f32; w = get_attr(weight: f32); y = mm(x, w)``
    After:  ``x16 = _to_copy(x, f16); w = get_attr(weight_f16); y = mm(x16, w);
    out = _to_copy(y, f32)``"""
    target = settings.dtype
    if target == torch.float32 or in_precision_already(gm, target):
        return gm
    graph = gm.graph
    cast_storages: dict[tuple, torch.Tensor] = {}
    cast_names: dict[tuple, str] = {}
    for node in list(graph.nodes):
        if node.op == "get_attr":
            value = operator.attrgetter(node.target)(gm)
            if isinstance(value, torch.Tensor) and value.dtype in FLOATS and value.dtype != target:
                key = (value.untyped_storage().data_ptr(), value.dtype, tuple(value.shape),
                       value.stride(), value.storage_offset())
                if key not in cast_names:
                    name = node.target.replace(".", "_") + f"_{settings.precision}"
                    gm.register_buffer(name, _cast_view(value, target, cast_storages))
                    cast_names[key] = name
                node.target = cast_names[key]
        elif node.op == "placeholder" and _is_float(node.meta.get("val")) and \
                node.meta["val"].dtype != target:  # (an input in the target dtype: no cast;
            # a KV cache must stay the network input it is, written in place)
            with graph.inserting_after(node):
                cast = graph.call_function(aten._to_copy.default, (node,), {"dtype": target})
            node.replace_all_uses_with(cast, delete_user_cb=lambda u: u is not cast)
        elif node.op == "call_function" and node.target in FULL_PRECISION_OPS:
            _compute_in_fp32(graph, node)
            _back_to_target_from_complex(graph, node, target)  # _fft_c2r: complex -> real
        elif node.op == "call_function":
            _back_to_target_from_complex(graph, node, target)
            dtype = node.kwargs.get("dtype")
            if dtype in FLOATS and dtype != target:
                node.kwargs = {**node.kwargs, "dtype": target}
            node.args = tuple(_clamp_scalar(a, target) for a in node.args)
        elif node.op == "output":
            outs = node.args[0]
            flat, spec = torch.utils._pytree.tree_flatten(outs)
            new = []
            for out in flat:
                val = out.meta.get("val") if isinstance(out, torch.fx.Node) else None
                if _is_float(val) and val.dtype != target:
                    with graph.inserting_before(node):
                        out = graph.call_function(aten._to_copy.default, (out,),
                                                  {"dtype": val.dtype})
                new.append(out)
            node.args = (torch.utils._pytree.tree_unflatten(new, spec),)
    return gm
