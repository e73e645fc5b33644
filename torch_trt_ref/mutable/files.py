"""Save and load of a ``MutableModule``: one zip holding the compiled program (the file
``torch_trt_ref.save`` writes) and the wrapped model with what the wrapper knows (settings,
input specs, dynamic ranges, the weights the engines hold), so the loaded module is mutable
again: a change of the loaded model's weights is refit at its next call."""

from __future__ import annotations

import io
import os
import tempfile
import zipfile
from pathlib import Path

import torch

from ..errors import SerializationError
from ..serialize import load as load_program
from ..serialize import save as save_program
from ..serialize import zip_holds
from . import view
from .module import MutableModule, Update

MARKER, PROGRAM, STATE = "mutable.json", "program.trtref", "mutable.pt"
_KEPT = ("settings", "_inputs", "_kwarg_inputs", "_ranges", "_applied", "_specs",
         "_kw_specs", "compile_count", "refit_count")


def is_mutable_file(path: str | os.PathLike) -> bool:
    """True for a file ``save_mutable`` wrote (anything else: False, and the program
    loader says what is wrong with it)."""
    return zip_holds(path, MARKER)


def save_mutable(module: MutableModule, path: str | os.PathLike) -> Path:
    """Write ``module`` (compiled: call it once first) to ``path``. The wrapped model is
    pickled by ``torch.save``, so loading it needs its classes importable (transformers,
    peft)."""
    if module.compiled is None:
        raise ValueError("this MutableModule has not compiled yet (it compiles at its first "
                         "call); call it once, then save")
    path = Path(path)
    with tempfile.TemporaryDirectory() as tmp:
        program = save_program(module.compiled, Path(tmp) / PROGRAM)
        state = io.BytesIO()
        torch.save({"model": module.model, **{k: getattr(module, k) for k in _KEPT}}, state)
        partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
            archive.writestr(MARKER, '{"format": "torch_trt_ref.mutable", "version": 1}')
            archive.write(program, PROGRAM)
            archive.writestr(STATE, state.getvalue())
        os.replace(partial, path)
    return path


def load_mutable(path: str | os.PathLike) -> MutableModule:
    """Read a file ``save_mutable`` wrote: the compiled program is checked as
    ``torch_trt_ref.load`` checks it; the model's weights are compared with the engines'
    at the first call (a change is refit)."""
    if not is_mutable_file(path):
        raise SerializationError(f"{path} is not a MutableModule file (no {MARKER}); "
                                 "torch_trt_ref.load reads compiled programs")
    with zipfile.ZipFile(path) as archive, tempfile.TemporaryDirectory() as tmp:
        archive.extract(PROGRAM, tmp)
        compiled = load_program(Path(tmp) / PROGRAM)
        state = torch.load(io.BytesIO(archive.read(STATE)), weights_only=False)
    module = MutableModule(state.pop("model"))
    for key, value in state.items():
        setattr(module, key, value)
    module.compiled = compiled
    base = view.base_model(module.model)
    module._structure = view.structure(base)
    # the loaded tensors are new objects: the first call compares their values
    module._signatures = {k: s[:2] + (None,) for k, s in view.signatures(base).items()}
    module.last_update = Update("none")
    return module
