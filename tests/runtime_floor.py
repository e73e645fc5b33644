"""The runtime on the oldest supported torch (nox session ``runtime_floor``): ``save DIR``
compiles two small programs (a conv/batch-norm net and the zoo's bert_2layer) with this
environment's torch and TensorRT and saves them without plans, with their inputs and
outputs; ``check DIR``, run where torch is older and TensorRT absent, imports torch_trt_ref
with TensorRT blocked, loads each program, runs it (on CUDA too, where there is a GPU) and
compares with the saved outputs. Exit status 0 only if every program matches."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import torch


def save(out: Path) -> None:
    import torch_trt_ref
    from zoo.registry import get

    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    conv = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8),
                               torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
                               torch.nn.Flatten(), torch.nn.Linear(8, 4)).eval()
    bert = get("bert_2layer")
    cases = {"convnet": (conv, (torch.randn(2, 3, 32, 32),)),
             "bert_2layer": (bert.factory(), bert.inputs()[0])}
    for name, (model, args) in cases.items():
        compiled = torch_trt_ref.compile(model, args, min_block_size=1)
        torch_trt_ref.save(compiled, out / f"{name}.prog", plans=False)
        with torch.no_grad():
            torch.save({"args": args, "outputs": compiled(*args)}, out / f"{name}.io.pt")
        print(f"saved {name}")


def check(folder: Path) -> int:
    sys.modules["tensorrt"] = sys.modules["tensorrt_rtx"] = None  # type: ignore[assignment]
    import torch_trt_ref
    from torch_trt_ref._trt import HAS_TENSORRT

    print(f"torch {torch.__version__}, TensorRT importable: {HAS_TENSORRT}")
    failures = 0
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    for path in sorted(folder.glob("*.prog")):
        io = torch.load(path.with_suffix(".io.pt"), weights_only=False)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            loaded = torch_trt_ref.load(path)
        for device in devices:
            loaded = loaded.to(device)
            args = [a.to(device) for a in io["args"]]
            with torch.no_grad():
                got = [loaded(*args) for _ in range(3)][-1]  # the last: graphed on CUDA
            want = torch.utils._pytree.tree_leaves(io["outputs"])
            got = torch.utils._pytree.tree_leaves(got)
            ok = len(got) == len(want) and all(
                torch.allclose(g.cpu(), w, rtol=1e-3, atol=1e-4) for g, w in zip(got, want))
            failures += not ok
            print(f"{path.name} on {device}: {'ok' if ok else 'MISMATCH'}")
    return 1 if failures else 0


if __name__ == "__main__":
    command, folder = sys.argv[1], Path(sys.argv[2])
    if command == "save":
        save(folder)
    elif command == "check":
        sys.exit(check(folder))
    else:
        sys.exit(f"usage: {sys.argv[0]} save|check DIR (got {command!r})")
