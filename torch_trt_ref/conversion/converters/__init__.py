"""Built-in converters, one module per op family. Importing this package registers them;
the aliases (``aliases.py``) last, since they reuse the converters of other modules."""

import importlib
import pkgutil

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

from .aliases import register_aliases  # noqa: E402

register_aliases()
