"""A stand-in for the ``tensorrt`` module where neither ``tensorrt`` nor ``tensorrt_rtx``
is installed (a deployment machine that only loads saved programs).

Every attribute path (``trt.ILogger.Severity.ERROR``, ``trt.DataType.FP8``) is a distinct,
hashable placeholder class, so module-level code that subclasses TensorRT classes or keys
tables by its enums still imports; creating one (``trt.Builder(logger)``) raises the
ImportError that says what to install. ``__name__`` and ``__version__`` are ``"none"``, so a
loaded engine's plan never matches this "TensorRT" and runs on the reference executor."""

from __future__ import annotations


class _Placeholder(type):
    """Metaclass of the placeholders: attribute access makes (and keeps) a child."""

    def __getattr__(cls, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        child = _placeholder(f"{cls.__qualname__}.{name}", cls._why)
        setattr(cls, name, child)
        return child

    def __call__(cls, *args, **kwargs):
        if cls._subclassed:  # our own subclass of a TensorRT class (a logger, a writer)
            return super().__call__(*args, **kwargs)
        raise ImportError(f"{cls.__qualname__} needs TensorRT, which is not installed: "
                          f"{cls._why}")

    def __repr__(cls) -> str:
        return f"<missing TensorRT: {cls.__qualname__}>"


def _placeholder(qualname: str, why: str, subclassed: bool = False) -> type:
    cls = _Placeholder(qualname.rsplit(".", 1)[-1], (), {
        "_why": why, "_subclassed": subclassed,
        "__init_subclass__": classmethod(lambda sub, **kw: setattr(sub, "_subclassed", True)),
        "__init__": lambda self, *a, **k: None})
    cls.__qualname__ = qualname
    return cls


def missing_tensorrt(why: str):
    """The stand-in module object: ``trt.X`` is a placeholder, ``trt.__name__`` "none"."""
    module = _placeholder("tensorrt", why)
    module.__name__ = "none"  # type: ignore[misc]
    module.__version__ = "none"
    return module
