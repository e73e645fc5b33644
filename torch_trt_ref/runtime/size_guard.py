"""``SizeGuard``: a compiled module refuses input sizes at which the graph it was traced as
does not hold (Note [Conditions over several sizes] in size_conditions.py)."""

from __future__ import annotations

import math


class SizeGuard:
    """A forward pre-hook (``register_forward_pre_hook(..., with_kwargs=True)``).
    ``conditions``: (Python condition over size symbols, {symbol: (input index, input name,
    dim)}); an input whose sizes make a condition false raises RuntimeError."""

    def __init__(self, conditions: list[tuple[str, dict]]):
        self.conditions = [(code, dict(sizes)) for code, sizes in conditions]

    def __call__(self, module, args: tuple, kwargs: dict) -> None:
        for code, sizes in self.conditions:
            values = {}
            for symbol, (i, name, d) in sizes.items():
                value = args[i] if i < len(args) else kwargs.get(name)
                if value is None:
                    break
                values[symbol] = int(value.shape[d])
            else:
                if not eval(code, {"__builtins__": {}, "math": math}, values):  # noqa: S307
                    shown = ", ".join(f"input {name!r} dim {d} = {values[s]}"
                                      for s, (_, name, d) in sizes.items())
                    raise RuntimeError(
                        f"input sizes {shown} break the condition {code} under which the "
                        f"model was traced: eager PyTorch raises or takes another path at "
                        f"these sizes, so the compiled module does not run them")
