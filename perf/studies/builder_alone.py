"""``python perf/studies/builder_alone.py``: peak RSS of TensorRT's builder alone on resnet18,
with no compiler around it, in whichever TensorRT the running Python has. The network comes from
TensorRT's own ONNX parser, so the same network is built by both TensorRT-RTX versions of
the side by side (ours 1.7.1; the peer's venv, ``$PEER_VENV/bin/python``, has 1.5):

  .venv/bin/python perf/studies/builder_alone.py --export     # writes out/resnet18.onnx (torch)
  .venv/bin/python perf/studies/builder_alone.py              # builds it: TensorRT-RTX 1.7.1
  $PEER_VENV/bin/python perf/studies/builder_alone.py         # the peer's TensorRT-RTX 1.5

Each build in a fresh builder, ``--builds`` times in one process; the first build is the
one a compile pays (later ones reuse freed heap differently). The peak is sampled every
2 ms above the RSS just before ``build_serialized_network``. It stands beside the side by
side's resnet18 row: a peak-RSS target below this is one no compiler on this builder can
meet (issue 25). Standalone: imports no torch_trt_ref, so it runs in the peer's venv."""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ONNX = ROOT / "out" / "resnet18.onnx"
MiB = 2**20


def export() -> None:
    import torch
    import torchvision

    ONNX.parent.mkdir(exist_ok=True)
    model = torchvision.models.resnet18().eval()
    torch.onnx.export(model, (torch.randn(1, 3, 224, 224),), str(ONNX), dynamo=False)
    print(f"wrote {ONNX} ({ONNX.stat().st_size / MiB:.1f} MiB)")


def build_once(trt) -> tuple[float, int]:
    import psutil

    process = psutil.Process()
    logger = trt.Logger(trt.Logger.ERROR)
    builder = trt.Builder(logger)
    network = builder.create_network(0)
    parser = trt.OnnxParser(network, logger)
    if not parser.parse_from_file(str(ONNX)):
        raise RuntimeError(f"TensorRT's parser rejected {ONNX}")
    config = builder.create_builder_config()
    gc.collect()
    trim = getattr(ctypes.CDLL(None), "malloc_trim", None)
    if trim is not None:  # return freed heap, so the baseline is honest
        trim(0)
    base = process.memory_info().rss
    peak, done = [base], threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], process.memory_info().rss)
            time.sleep(0.002)

    sampler = threading.Thread(target=sample)
    sampler.start()
    plan = builder.build_serialized_network(network, config)
    done.set()
    sampler.join()
    if plan is None:
        raise RuntimeError("TensorRT's builder returned no plan")
    return (peak[0] - base) / MiB, plan.nbytes


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="perf/studies/builder_alone.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--export", action="store_true", help="write out/resnet18.onnx")
    parser.add_argument("--builds", type=int, default=3)
    args = parser.parse_args(argv)
    if args.export:
        export()
        return 0
    if not ONNX.exists():
        parser.error(f"{ONNX} is missing: run with --export first (in the project's venv)")
    try:
        import tensorrt_rtx as trt
    except ImportError:
        import tensorrt as trt
    rows = []
    for i in range(args.builds):
        peak, plan = build_once(trt)
        rows.append({"build": i, "peak_mib": round(peak, 1), "plan_mib": round(plan / MiB, 1)})
        print(json.dumps({"tensorrt": f"{trt.__name__} {trt.__version__}", **rows[-1]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
