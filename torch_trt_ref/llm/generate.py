"""``generate(compiled, input_ids, max_new_tokens=...)``: prompt + new tokens, as transformers'
``generate`` returns them: one prefill step over the prompt, then one decode step per token
(greedy, or sampling from the softmax with a seeded ``generator``); it stops after an
end-of-sequence token as transformers does (a batch: once every sequence has ended).
``cuda_graph=True`` replays the decode steps from one CUDA graph bound to the cache
(llm/graphs.py)."""

from __future__ import annotations

from typing import Callable

import torch

from .compiled import CompiledDecoder
from .graphs import DecodeGraph


def generate(compiled: CompiledDecoder, input_ids: torch.Tensor, max_new_tokens: int = 20,
             do_sample: bool = False, generator: torch.Generator | None = None,
             temperature: float = 1.0, eos_token_id: int | None = -1,
             on_token: Callable[[int], None] | None = None,
             cuda_graph: bool | DecodeGraph = False, pad_token_id: int | None = None
             ) -> torch.Tensor:
    """``input_ids`` [batch, prompt] -> [batch, prompt + new] (int64; ``batch``: the
    compiled ``batch_size``, prompts of equal length). ``eos_token_id`` -1 means the model's
    config value; None never stops early; a sequence that ended gets ``pad_token_id``
    (default: the config's, else the first end token) until all have ended. ``on_token(i)`` is
    called after each new token (a progress bar). ``cuda_graph``: decode steps replay one
    CUDA graph (Note [Decode graph]; ``input_ids`` on the decoder's CUDA device), captured
    at this call (True), or the one of a ``DecodeGraph`` made before (its cache is used, so
    calls that pass the same one capture once; its decoder may be another compile of the
    same model, e.g. a decode-only one: Note [Decode graph])."""
    batch = compiled.batch_size
    if input_ids.dim() != 2 or input_ids.shape[0] != batch:
        raise ValueError(f"input_ids must be [{batch}, prompt_len] (the compiled batch_size "
                         f"of sequences of equal length), got {tuple(input_ids.shape)}")
    prompt = input_ids.shape[1]
    if prompt > compiled.max_prompt_len or prompt + max_new_tokens > compiled.max_seq_len + 1:
        raise ValueError(f"a {prompt}-token prompt and {max_new_tokens} new tokens do not fit "
                         f"max_prompt_len={compiled.max_prompt_len}, "
                         f"max_seq_len={compiled.max_seq_len}")
    if eos_token_id == -1:
        eos_token_id = getattr(compiled.config, "eos_token_id", None)
    stops = torch.tensor(eos_token_id if isinstance(eos_token_id, (list, tuple)) else
                         [] if eos_token_id is None else [eos_token_id], dtype=input_ids.dtype,
                         device=input_ids.device)
    if pad_token_id is None:
        pad_token_id = getattr(compiled.config, "pad_token_id", None)
    if pad_token_id is None and stops.numel():
        pad_token_id = int(stops[0])
    running = torch.ones(batch, 1, dtype=torch.bool, device=input_ids.device)
    if isinstance(cuda_graph, DecodeGraph):
        decode, cache = cuda_graph, cuda_graph.cache  # earlier writes past the prompt are
        theirs = [(tuple(t.shape), t.dtype) for t in cache]  # masked out until rewritten
        if theirs != [(tuple(s), compiled.dtype) for s in compiled.shapes]:
            raise ValueError(f"the DecodeGraph's cache {theirs[:2]}... does not fit this "
                             f"decoder's {compiled.shapes[:2]}... ({compiled.dtype}); make "
                             "it from a decoder compiled from the same model and max_seq_len")
    else:
        cache = compiled.new_cache(input_ids.device)
        decode = DecodeGraph(compiled, cache) if cuda_graph else (
            lambda token, position: compiled.step(token, position, cache))
    tokens = [input_ids]
    logits = compiled.step(input_ids, 0, cache)
    for i in range(max_new_tokens):
        scores = logits.float()
        if do_sample:
            probs = torch.softmax(scores / temperature, dim=-1)
            token = torch.multinomial(probs, 1, generator=generator)
        else:
            token = scores.argmax(-1, keepdim=True)
        token = token.to(input_ids.dtype)
        if stops.numel():  # a finished sequence gets pad tokens, as transformers gives it
            token = torch.where(running, token, pad_token_id)
            running = running & ~torch.isin(token, stops)
        tokens.append(token)
        if on_token is not None:
            on_token(i)
        if i == max_new_tokens - 1 or (stops.numel() and not running.any()):  # a sync
            break
        logits = decode(tokens[-1], prompt + i)
    return torch.cat(tokens, dim=1)
