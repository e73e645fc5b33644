"""``torch_trt_ref.llm.compile``: a transformers ``*ForCausalLM`` as one engine over a static
KV cache (DESIGN D15), serving decode (1 token, optimization profile 0) and prefill (1 ..
``max_prompt_len`` tokens, profile 1); ``CompiledDecoder`` owns nothing but the compiled
step: the caller owns the cache buffers (``new_cache``), which the engine writes in place."""

from __future__ import annotations

import copy
import warnings
from dataclasses import dataclass

import torch

from ..compiler import compile as compile_module
from ..inputs import Input
from ..runtime.cuda_graphs import set_cuda_graphs
from ..runtime.module import EngineModule
from ..settings import CompilationSettings
from .step import cache_shapes, step_for

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


@dataclass
class CacheReport:
    """What the compiled step does with its KV cache."""

    layers: int  # K/V buffer pairs
    shape: tuple[int, ...]  # of layer 0's K buffer
    dtype: str
    bytes: int  # all buffers together
    in_place: int  # engine outputs that are cache inputs written in place (Engine.aliases)
    profiles: int  # optimization profiles of the engine(s)

    def to_json(self) -> dict:
        return {**self.__dict__, "shape": list(self.shape)}


class CompiledDecoder(torch.nn.Module):
    """A compiled decoder step: ``step(input_ids [batch, T], position, cache)`` returns the
    logits of the last token of each sequence and writes the tokens' K/V into ``cache`` (a
    list of buffers from ``new_cache``) in place."""

    def __init__(self, module: torch.nn.Module, shapes: list[tuple[int, ...]],
                 dtype: torch.dtype, max_seq_len: int, max_prompt_len: int, config):
        super().__init__()
        self.module, self.shapes, self.dtype = module, shapes, dtype
        # Note [Graph replay] (runtime/cuda_graphs.py): a replay copies inputs into the
        # graph's own buffers, so the engine would write those, not the caller's cache
        # (the runtime's in-place check would raise). Off until replays bind the cache.
        set_cuda_graphs(module, False)
        self.max_seq_len, self.max_prompt_len, self.config = max_seq_len, max_prompt_len, config
        self.batch_size = shapes[0][0]
        self.compile_report = module.compile_report
        self.executor = ",".join(sorted({m.executor for m in module.modules()
                                         if isinstance(m, EngineModule)}))
        engines = [m.engine for m in module.modules() if isinstance(m, EngineModule)]
        one = torch.empty(0, dtype=dtype).element_size()
        self.compile_report.kv_cache = CacheReport(
            len(shapes) // 2, shapes[0], str(dtype).removeprefix("torch."),
            sum(torch.Size(s).numel() for s in shapes) * one,
            sum(len(e.aliases) for e in engines), max(e.profile_count for e in engines))

    def new_cache(self, device: str | torch.device = "cpu") -> list[torch.Tensor]:
        """Zeroed K/V buffers of the compiled shapes, owned by the caller."""
        return [torch.zeros(s, dtype=self.dtype, device=device) for s in self.shapes]

    def check_positions(self, position: int, tokens: int) -> None:
        if position + tokens > self.max_seq_len:
            raise ValueError(f"positions {position}..{position + tokens - 1} do "
                             f"not fit the static cache of max_seq_len={self.max_seq_len}")

    def step(self, input_ids: torch.Tensor, position: int, cache: list[torch.Tensor]
             ) -> torch.Tensor:
        self.check_positions(position, input_ids.shape[1])
        where = torch.tensor([position], dtype=torch.long, device=input_ids.device)
        out = self.module(input_ids, where, *cache)
        return out[0]

    forward = step


def compile(model: torch.nn.Module, max_seq_len: int, precision: str = "fp32",
            max_prompt_len: int | None = None, batch_size: int = 1,
            **settings) -> CompiledDecoder:
    """Compile ``model`` (a transformers ``*ForCausalLM``) for greedy or sampled decoding
    with a static KV cache of ``max_seq_len`` positions: one engine, two optimization
    profiles (decode: 1 token; prefill: 1 .. ``max_prompt_len`` tokens, default
    ``max_seq_len``), for ``batch_size`` sequences of equal length. ``settings`` go to
    ``torch_trt_ref.compile`` (executor, quantized models, ...); the whole step must convert
    (``require_full_compilation``), since the cache is written in place only inside an
    engine."""
    if precision not in DTYPES:
        raise ValueError(f"precision must be one of {sorted(DTYPES)}, got {precision!r}")
    if max_seq_len < 2:
        raise ValueError(f"max_seq_len must be >= 2, got {max_seq_len}")
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be an int >= 1, got {batch_size!r}")
    max_prompt_len = max_prompt_len or max_seq_len
    model = model.eval()
    dtype = DTYPES[precision]
    if dtype != torch.float32:  # traced in the precision of its cache (q, k, v agree)
        model = copy.deepcopy(model).to(dtype)
    b = batch_size
    shapes = [(b, s[1], max_seq_len, s[3]) for s in cache_shapes(model)]
    ids = Input(profiles=[{"min": (b, 1), "opt": (b, 1), "max": (b, 1)},
                          {"min": (b, 1), "opt": (b, max(1, max_prompt_len // 2)),
                           "max": (b, max_prompt_len)}], dtype=torch.long, high=8)
    inputs = [ids, Input(shape=(1,), dtype=torch.long)]
    inputs += [Input(shape=s, dtype=dtype) for s in shapes]
    settings = {"precision": precision, "require_full_compilation": True,
                "min_block_size": 1, **settings}
    CompilationSettings(**{k: v for k, v in settings.items() if k != "executor"})
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*past_key_values.*deprecated")
        module = compile_module(step_for(model, len(shapes)), inputs, **settings)
    return CompiledDecoder(module, shapes, dtype, max_seq_len, max_prompt_len,
                           model.config)
