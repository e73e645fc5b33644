"""The tie-aware oracle of a quantized model (docs/quantization.md, "Rounding ties"): where a
quantizer's float64 input lies so close to a rounding boundary that fp32 arithmetic cannot
decide the rounding, the compiled result may have taken the other grid point; everywhere
else it must meet the plain float64 rule."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import torch

from ..accuracy import K_SMALL, SMALL_NUMEL, K, Verdict, cast_floats, judge, tensors
from .ptq import TensorQuantizer

# Note [Ambiguous quantizer inputs]
# The float64 oracle runs the arithmetic between quantizers in float64; an engine runs it in
# fp32. Eager fp32 shows how far fp32 arithmetic moves a quantizer's input from float64:
# e = max |x32 - x64| over the tensor, and the float64 rule lets a compiled result be k
# times as wrong as eager (Note [k per precision] in accuracy.py). So an element whose
# float64 input x lies within b = k * e of a rounding boundary (quantize(x - b) and
# quantize(x + b) differ) has no decided code in fp32: the compiled engine may round it
# either way. Only those elements, and only to the other grid point across that boundary,
# are allowed to differ. A quantizer whose input eager computes exactly (a weight, a model
# input) has e = 0 and no ambiguous element: its ties must round as the oracle does.
MAX_AMBIGUOUS = 64  # one float64 pass each: more than this and no allowance is tried


@dataclass
class _Site:
    """One call of one quantizer: its name, call number, the allowance b and the flat
    indices of its ambiguous elements."""

    name: str
    call: int
    bound: float
    ambiguous: list[int] = field(default_factory=list)


class _Runner:
    """A copy of the model in ``dtype`` whose INT8/FP8 quantizers record each call's input;
    ``run(flips)`` with flips (name, call) -> (b, flat indices) takes those codes to the other
    grid point within b."""

    def __init__(self, model: torch.nn.Module, args: tuple, kwargs: dict, dtype: torch.dtype):
        self.model = copy.deepcopy(model).to(dtype)
        self.args, self.kwargs = cast_floats(args, dtype), cast_floats(kwargs, dtype)
        self.flips: dict[tuple[str, int], tuple[float, set[int]]] = {}
        self.seen: dict[tuple[str, int], torch.Tensor] = {}
        self.calls: dict[str, int] = {}
        for name, q in self.model.named_modules():
            if isinstance(q, TensorQuantizer) and q.precision != "nvfp4":
                q.register_forward_hook(lambda m, i, o, n=name: self._hook(m, i, o, n))

    def _hook(self, module, inputs, output, name):
        call = self.calls[name] = self.calls.get(name, -1) + 1
        x = inputs[0].detach()
        self.seen[name, call] = x
        if (name, call) in self.flips:
            bound, where = self.flips[name, call]
            return _flipped(module, x, output, bound, sorted(where))
        return output

    def run(self, flips=None):
        """The outputs; ``self.seen`` then holds each quantizer call's input."""
        self.flips, self.seen, self.calls = flips or {}, {}, {}
        with torch.no_grad():
            return self.model(*self.args, **self.kwargs)


def _candidates(q: TensorQuantizer, x: torch.Tensor, bound: float):
    """quantize(x - b) and quantize(x + b): different where the code is ambiguous."""
    return q.forward(x - bound), q.forward(x + bound)


def _flipped(q, x, output, bound, where):
    """``output`` with the codes at flat indices ``where`` on the other grid point: the
    candidate within ``bound`` that differs from the oracle's (the nearer one to x if
    both do)."""
    down, up = (t.flatten()[where] for t in _candidates(q, x, bound))
    now, xs = output.flatten()[where], x.flatten()[where]
    other = torch.where(up == now, down,
                        torch.where((down == now) | ((up - xs).abs() <= (down - xs).abs()),
                                    up, down))
    output = output.clone()
    output.view(-1)[where] = other
    return output


def _flat(outputs) -> torch.Tensor:
    return torch.cat([t.detach().double().flatten() for t in tensors(outputs)
                      if t.is_floating_point()] or [torch.zeros(0, dtype=torch.float64)])


def ambiguous_sites(model: torch.nn.Module, args: tuple, kwargs: dict):
    """The float64 outputs, every INT8/FP8 quantizer call's ambiguous elements (Note
    [Ambiguous quantizer inputs]) and the float64 runner; NVFP4 quantizers get no
    allowance (a block's scale depends on the whole block)."""
    runner = _Runner(model, args, kwargs, torch.float64)
    out64 = runner.run()
    x64, qs = runner.seen, dict(runner.model.named_modules())
    if not x64:  # no INT8/FP8 quantizer ran: nothing can be ambiguous
        return out64, [], runner
    runner32 = _Runner(model, args, kwargs, torch.float32)
    runner32.run()
    x32 = runner32.seen
    del runner32
    sites = []
    for (name, call), x in x64.items():
        if (name, call) not in x32 or x32[name, call].shape != x.shape or not x.numel():
            continue
        k = K_SMALL if x.numel() < SMALL_NUMEL else K[torch.float32]
        bound = k * float((x32[name, call].double() - x).abs().max())
        if bound == 0:
            continue
        down, up = _candidates(qs[name], x, bound)
        where = (down != up).flatten().nonzero().flatten().tolist()
        if where:
            sites.append(_Site(name, call, bound, where))
    return out64, sites, runner


def judge_tie_aware(model: torch.nn.Module, args: tuple, kwargs: dict, compiled: Any,
                    eager: Any, max_ambiguous: int = MAX_AMBIGUOUS
                    ) -> tuple[Verdict, dict[str, Any]]:
    """The float64 rule against the quantized ``model``'s float64 run, and, if that fails,
    against the float64 run with some ambiguous codes taken the other way (Note [Ambiguous
    quantizer inputs]): the subset chosen greedily from each flip's effect on the outputs
    (one float64 pass per ambiguous element), then run exactly. Eager's error, which sets
    the allowance, is always measured against the plain float64 run. Returns the verdict
    and a record: ambiguous count, the flips used, each site's bound."""
    out64, sites, runner = ambiguous_sites(model, args, kwargs)
    plain = judge(compiled, eager, out64)
    count = sum(len(s.ambiguous) for s in sites)
    record = {"ambiguous": count, "flipped": [], "sites": [
        {"quantizer": s.name, "call": s.call, "bound": s.bound, "ambiguous": len(s.ambiguous)}
        for s in sites]}
    if plain.passed or not count:
        return plain, record
    if count > max_ambiguous:
        plain.message += (f"; {count} ambiguous quantizer codes (more than {max_ambiguous}): "
                          "no tie allowance tried")
        return plain, record
    base, got = _flat(out64), _flat(compiled)
    finite = torch.isfinite(base) & torch.isfinite(got)
    effects = []
    for s in sites:
        for i in s.ambiguous:
            out = runner.run({(s.name, s.call): (s.bound, {i})})
            effects.append(((s, i), (_flat(out) - base)[finite]))
    chosen, residual = [], (got - base)[finite]
    while True:  # greedy: the flip that most reduces the residual, while one does
        gains = [(float(residual.pow(2).sum() - (residual - d).pow(2).sum()), j)
                 for j, (_, d) in enumerate(effects) if j not in chosen]
        best = max(gains, default=(0.0, None))
        if best[0] <= 0:
            break
        chosen.append(best[1])
        residual = residual - effects[best[1]][1]
    if not chosen:
        return plain, record
    flips: dict[tuple[str, int], tuple[float, set[int]]] = {}
    for j in chosen:
        s, i = effects[j][0]
        flips.setdefault((s.name, s.call), (s.bound, set()))[1].add(i)
        record["flipped"].append({"quantizer": s.name, "call": s.call, "index": i})
    alternative = runner.run(flips)
    verdict = judge(compiled, eager, alternative, eager_reference64=out64)
    note = (f"tie-aware: {len(chosen)} of {count} ambiguous quantizer codes taken the "
            "other way")
    verdict.message = note if verdict.passed else f"{plain.message}; {note}: " \
                                                  f"{verdict.message}"
    return verdict, record
