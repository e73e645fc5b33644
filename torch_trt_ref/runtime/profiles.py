"""``optimization_profile(module, profile)``: which optimization profile the engines of a
compiled module run (an index, or "auto": the first profile whose ranges hold the call),
Torch-TensorRT 2.14's ``runtime.optimization_profile``. It applies at once and, used as a
``with`` block, is undone on exit."""

from __future__ import annotations

import torch

from .module import EngineModule


class optimization_profile:  # noqa: N801 (the peer's name; a function-like context manager)
    """Pin every engine of ``module`` to ``profile`` (int) or "auto" (None means "auto").
    An index that some engine does not have is a ValueError naming how many it has."""

    def __init__(self, module: torch.nn.Module, profile: int | str | None):
        profile = "auto" if profile is None else profile
        engines = [m for m in module.modules() if isinstance(m, EngineModule)]
        if not engines:
            raise ValueError("optimization_profile: the module holds no TensorRT engine "
                             "(compile it with torch_trt_ref.compile first)")
        for m in engines:
            count = m.engine.profile_count
            if profile != "auto" and not (isinstance(profile, int) and 0 <= profile < count):
                raise ValueError(f"optimization_profile: {m.name} has {count} optimization "
                                 f"profile(s) (indices 0..{count - 1}); got {profile!r}, "
                                 "expected one of those indices or 'auto'")
        self._saved = [(m.handle, m.handle.profile) for m in engines]
        for m in engines:
            m.handle.profile = profile

    def __enter__(self) -> "optimization_profile":
        return self

    def __exit__(self, *exc) -> None:
        for handle, profile in self._saved:
            handle.profile = profile


def last_profiles(module: torch.nn.Module) -> dict[str, int | None]:
    """The optimization profile each engine of ``module`` ran in its latest call."""
    return {m.name: m.handle.last_profile for m in module.modules()
            if isinstance(m, EngineModule)}
