"""Zoo programs saved without their weights (issue 27): a lent GPU machine takes 64 MiB per
transfer, a BERT-4L or resnet18 program in fp32 about 50 MB. The zoo model is rebuilt from
its seed on the machine that loads the program (``zoo latency`` checks its weights'
checksum), so the engine weights that ``torch_trt_ref.refit`` recomputes from the model's
state dict need not travel: ``strip`` replaces each with a zero of its shape and dtype that
holds one element (a stride-0 expansion, pickled as one element), and ``restore`` refits
them from the model. Constants the compile computed (masks, shapes) stay in the program."""

from __future__ import annotations

import torch

import torch_trt_ref
from torch_trt_ref.runtime.module import EngineModule


def strip(compiled: torch.nn.Module, model: torch.nn.Module) -> int:
    """Replace, in place, every engine weight of ``compiled`` that refit recomputes from
    ``model`` (the module it was compiled from) by a one-element zero expansion; returns
    the bytes left out."""
    recomputed = {key[1:] for key in compiled.weight_program.run(dict(model.state_dict()))
                  if key[0] == "engine"}
    saved = 0
    for segment, module in compiled.named_modules():
        if not isinstance(module, EngineModule):
            continue
        for layer in module.engine.snapshot.layers:
            for role, value in layer.attrs.items():
                if (segment, layer.name, role) in recomputed and isinstance(value, torch.Tensor):
                    saved += value.numel() * value.element_size()
                    layer.attrs[role] = torch.zeros((), dtype=value.dtype).expand(value.shape)
    return saved


def restore(compiled: torch.nn.Module, model: torch.nn.Module) -> torch.nn.Module:
    """The weights of ``model`` into a stripped program (``torch_trt_ref.refit``)."""
    return torch_trt_ref.refit(compiled, model)
