"""Checks of input sizes against conditions over several sizes (Note [Conditions over several
sizes] in size_conditions.py): ``condition_holds`` for ``BySize``'s branches, and
``SizeGuard``, the pre-hook modules saved before issue 36 carry."""

from __future__ import annotations

from ..size_conditions import holds


def condition_holds(code: str, sizes: dict, size_of) -> bool:
    """Whether ``code`` holds at the sizes ``size_of(input index, input name, dim)`` gives
    for ``sizes`` ({symbol: (input index, input name, dim)}); True when an input is absent
    (None)."""
    values = {}
    for symbol, (i, name, d) in sizes.items():
        size = size_of(i, name, d)
        if size is None:
            return True
        values[symbol] = int(size)
    return holds(code, values)


class SizeGuard:
    """A forward pre-hook that refuses input sizes at which a condition of the trace fails.
    Compiles no longer install it (size cover runs the failing sizes in eager and covers
    them, or raises as eager does: size_cover.py); kept so that modules saved with it load
    and run as before."""

    def __init__(self, conditions: list[tuple[str, dict]]):
        self.conditions = [(code, dict(sizes)) for code, sizes in conditions]

    def __call__(self, module, args: tuple, kwargs: dict) -> None:
        def size_of(i, name, d):
            value = args[i] if i < len(args) else kwargs.get(name)
            return None if value is None else value.shape[d]

        for code, sizes in self.conditions:
            if not condition_holds(code, sizes, size_of):
                raise RuntimeError(
                    f"input sizes {_shown(sizes, size_of)} break the condition {code} under "
                    f"which the model was traced, so the compiled module does not run them")


def _shown(sizes: dict, size_of) -> str:
    return ", ".join(f"input {name!r} dim {d} = {size_of(i, name, d)}"
                     for _, (i, name, d) in sizes.items())
