"""Coverage against Torch-TensorRT 2.14's converter targets: which of them we convert, and
for each one we do not, why it cannot run here. ``python -m conformance.coverage`` prints
the markdown section of docs/converters.md."""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from torch_trt_ref import CONVERTERS
from torch_trt_ref.settings import op_name

_NCCL = ("a multi-GPU collective (NCCL) that Torch-TensorRT's distributed passes fuse; it "
         "needs several GPUs and the NCCL plugin")
_TORCH_TRT_OP = ("a custom op defined by the torch_tensorrt package (``torch.ops.tensorrt`` "
                 "is empty without it), so no graph here can contain it")

# Targets that cannot be converted without a GPU or a plugin, with the reason.
NOT_HERE = {
    **{f"tensorrt.fused_nccl_{kind}.default": _NCCL for kind in (
        "all_gather", "all_reduce", "all_to_all", "gather", "reduce_scatter", "scatter")},
    "tensorrt.conv_asym_pad.default": _TORCH_TRT_OP + " (its own asymmetric-padding "
                                                      "convolution)",
}


REFERENCE = Path(__file__).resolve().parent / "torch_tensorrt_2.14_converter_targets.txt"


def reference_targets(path: Path = REFERENCE) -> set[str]:
    """Torch-TensorRT 2.14's converter targets, by name."""
    names = set()
    for line in path.read_text().splitlines():
        line = line.strip()
        if line.startswith("torch.ops."):
            names.add(line.removeprefix("torch.ops."))
        elif line:
            names.add(line)
    return names


def our_targets() -> set[str]:
    """The targets our converter registry converts, by name."""
    return {op_name(t) for t in CONVERTERS.targets()}


def _is_packet(name: str) -> bool:
    """``aten.matmul`` (an OpOverloadPacket) as opposed to ``aten.matmul.default``."""
    namespace, _, rest = name.partition(".")
    return namespace in ("aten", "prims") and "." not in rest


def covered(name: str, ours: set[str]) -> bool:
    """A packet target counts as converted when its ``.default`` overload is (the overload
    a call of the packet on tensors resolves to); other targets by name."""
    if _is_packet(name):
        namespace, op = name.split(".")
        packet = getattr(getattr(torch.ops, namespace), op)
        return "default" in packet.overloads() and f"{name}.default" in ours
    return name in ours


def coverage() -> tuple[list[str], dict[str, str | None]]:
    """(targets we convert, {target we do not convert: reason, None when it has none})."""
    ours = our_targets()
    theirs = sorted(reference_targets())
    done = [t for t in theirs if covered(t, ours)]
    return done, {t: NOT_HERE.get(t) for t in theirs if t not in done}


def render() -> str:
    done, missing = coverage()
    total = len(done) + len(missing)
    lines = [f"{len(done)} of {total} targets of Torch-TensorRT 2.14 have a converter here "
             f"(a packet such as `aten.matmul` counts through its `.default` overload). "
             f"The {len(missing)} without one:", ""]
    lines += [f"- `{t}`: {why or 'NO REASON RECORDED (add a converter or a reason)'}"
              for t, why in missing.items()]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    argparse.ArgumentParser(description=__doc__).parse_args(argv)
    print(render(), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
