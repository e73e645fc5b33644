"""Save and load of a ``CompiledDecoder`` (``torch_trt_ref.save`` / ``load`` dispatch here):
one zip holding the compiled step (the program file ``torch_trt_ref.save`` writes, checked
as ``load`` checks it) and a JSON record of what the decoder knows besides (cache shapes and
dtype, ``max_seq_len``, ``max_prompt_len``, the model's config as a dict). Loading needs
neither TensorRT (``plans=False``: the engine runs on the reference executor, e.g. on a GPU
machine without TensorRT) nor transformers (the config comes back as a transformers config
where transformers is importable, else as a namespace of its fields)."""

from __future__ import annotations

import importlib
import json
import os
import tempfile
import types
import zipfile
from pathlib import Path

from ..errors import SerializationError
from ..serialize import load as load_program
from ..serialize import save as save_program
from ..serialize import zip_holds
from .compiled import DTYPES, CompiledDecoder

FORMAT, VERSION = "torch_trt_ref.llm_decoder", 1
MARKER, PROGRAM = "llm_decoder.json", "program.trtref"


def is_decoder_file(path: str | os.PathLike) -> bool:
    """True for a file ``save_decoder`` wrote (anything else: False)."""
    return zip_holds(path, MARKER)


def _config_json(config) -> dict:
    cls = type(config)
    return {"class": f"{cls.__module__}:{cls.__qualname__}", "fields": config.to_dict()}


def _config(record: dict):
    """The config class named in ``record`` rebuilt from its fields, or (no transformers,
    or a class this transformers lacks) a namespace of the fields."""
    module, _, name = record["class"].partition(":")
    try:
        cls = getattr(importlib.import_module(module), name)
        return cls.from_dict(record["fields"])
    except (ImportError, AttributeError):
        return types.SimpleNamespace(**record["fields"])


def save_decoder(decoder: CompiledDecoder, path: str | os.PathLike, plans: bool = True
                 ) -> Path:
    """Write ``decoder`` to ``path``; ``plans=False`` leaves the TensorRT plan out (the
    engine runs on the reference executor wherever it is loaded)."""
    path = Path(path)
    dtype = next(k for k, v in DTYPES.items() if v == decoder.dtype)
    record = {"format": FORMAT, "version": VERSION, "precision": dtype,
              "shapes": [list(s) for s in decoder.shapes], "max_seq_len": decoder.max_seq_len,
              "max_prompt_len": decoder.max_prompt_len, "config": _config_json(decoder.config)}
    with tempfile.TemporaryDirectory() as tmp:
        program = save_program(decoder.module, Path(tmp) / PROGRAM, plans=plans)
        partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
        try:
            with zipfile.ZipFile(partial, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
                archive.writestr(MARKER, json.dumps(record, indent=1, default=str))
                archive.write(program, PROGRAM)
            os.replace(partial, path)
        finally:
            partial.unlink(missing_ok=True)
    return path


def load_decoder(path: str | os.PathLike) -> CompiledDecoder:
    """Read a file ``save_decoder`` wrote: a ``CompiledDecoder`` on the CPU (``.to(device)``
    moves it), generating as the saved one did."""
    if not is_decoder_file(path):
        raise SerializationError(f"{path} is not a compiled decoder file (no {MARKER}); "
                                 "torch_trt_ref.load reads compiled programs")
    with zipfile.ZipFile(path) as archive, tempfile.TemporaryDirectory() as tmp:
        try:
            record = json.loads(archive.read(MARKER))
        except ValueError as err:
            raise SerializationError(f"{path}: {MARKER} is unreadable ({err})") from None
        if record.get("format") != FORMAT or record.get("version") != VERSION:
            raise SerializationError(f"{path}: {MARKER} holds {record.get('format')!r} "
                                     f"version {record.get('version')!r}; this torch_trt_ref "
                                     f"reads {FORMAT!r} version {VERSION}")
        if PROGRAM not in archive.namelist():
            raise SerializationError(f"{path}: the compiled step ({PROGRAM}) is missing")
        archive.extract(PROGRAM, tmp)
        module = load_program(Path(tmp) / PROGRAM)
    return CompiledDecoder(module, [tuple(s) for s in record["shapes"]],
                           DTYPES[record["precision"]], record["max_seq_len"],
                           record["max_prompt_len"], _config(record["config"]))

