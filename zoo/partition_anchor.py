"""The partition anchor table (issue 14): for the models Torch-TensorRT 2.13 was measured on
and for ops forced to PyTorch, how many TensorRT engines and PyTorch<->TensorRT transitions
each of our strategies makes, beside Torch-TensorRT's own partitioner on the same model.

Partition only (capture, lowering, capability, strategy; no engine is built), so the
numbers are machine-independent. ``torch-trt-ref zoo anchors`` prints the table (``--json``
keeps the rows); ``zoo run --full`` measures it too, and the zoo report shows it
(``section``)."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Callable

import torch

# Torch-TensorRT 2.13.0 + tensorrt_rtx 1.5, torch 2.13, min_block_size=5, its own
# partitioners (fast = adjacency, global) on the lowered graph: TensorRT subgraphs.
# Source: ../shared/reference/torch_tensorrt_2.13_rtx_cpu_measurements.jsonl, fields
# partitioners.mbs5 (nothing forced) and force_add_to_torch.mbs5 (aten.add.Tensor forced).
# Other forced ops were not measured for the peer.
PEER: dict[str, dict[str, tuple[int, int]]] = {  # model -> forced -> (fast, global)
    "resnet18": {"none": (1, 1), "aten.add.Tensor": (8, 8)},
    "mobilenet_v2": {"none": (1, 1), "aten.add.Tensor": (11, 11)},
    "bert_base": {"none": (1, 1), "aten.add.Tensor": (25, 24)},
    "gpt2": {"none": (1, 1), "aten.add.Tensor": (36, 36)},
    "t5_small_encoder": {"none": (1, 1), "aten.add.Tensor": (13, 13)},
    "vit_base": {"none": (1, 1), "aten.add.Tensor": (25, 24)},
}
FORCED = ("none", "aten.add.Tensor", "aten.gelu.default", "aten.native_layer_norm.default",
          "aten.mul.Tensor")
STRATEGIES = ("fast", "dependency_aware", "global")
MIN_BLOCK_SIZE = 5


class _FirstOutput(torch.nn.Module):
    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(x)[0]


def _models() -> dict[str, Callable[[], tuple[torch.nn.Module, torch.Tensor]]]:
    """The peer's models: torchvision with weights=None on a 1x3x224x224 image,
    transformers from their published configs (random weights, default attention), 128
    tokens."""
    import torchvision
    import transformers

    transformers.logging.set_verbosity_error()
    ids = torch.randint(0, 1000, (1, 128), generator=torch.Generator().manual_seed(0))
    image = torch.randn(1, 3, 224, 224)

    def text(model):
        return _FirstOutput(model), ids

    return {
        "resnet18": lambda: (torchvision.models.resnet18(weights=None), image),
        "mobilenet_v2": lambda: (torchvision.models.mobilenet_v2(weights=None), image),
        "bert_base": lambda: text(transformers.BertModel(transformers.BertConfig())),
        "gpt2": lambda: text(transformers.GPT2Model(transformers.GPT2Config(use_cache=False))),
        "t5_small_encoder": lambda: text(transformers.T5EncoderModel(transformers.T5Config(
            d_model=512, d_ff=2048, num_layers=6, num_heads=8, d_kv=64))),
        "vit_base": lambda: (_FirstOutput(transformers.ViTModel(transformers.ViTConfig())),
                             image),
    }


@dataclass
class Row:
    model: str
    forced: str
    strategy: str
    engines: int
    transitions: int
    peer: int | None  # Torch-TensorRT's count for the same partitioner, where measured

    @property
    def ratio(self) -> float | None:
        return self.engines / self.peer if self.peer else None


def measure(models: list[str] | None = None, progress: Callable[[str], None] = print
            ) -> list[Row]:
    from torch_trt_ref.capture import capture
    from torch_trt_ref.compiler import lower_program
    from torch_trt_ref.partitioning import partition
    from torch_trt_ref.settings import CompilationSettings

    rows = []
    for name, make in _models().items():
        if models and name not in models:
            continue
        start = time.perf_counter()
        torch.manual_seed(0)
        model, example = make()
        ep = capture(model.eval(), [example])
        for forced in FORCED:
            ops = frozenset() if forced == "none" else frozenset({forced})
            settings = CompilationSettings(min_block_size=MIN_BLOCK_SIZE,
                                           torch_executed_ops=ops)
            gm = lower_program(ep, settings)
            for strategy in STRATEGIES:
                result = partition(gm, settings, strategy=strategy)
                peer = PEER.get(name, {}).get(forced)
                rows.append(Row(name, forced, strategy, result.count("tensorrt"),
                                result.transitions(),
                                None if peer is None else peer[strategy == "global"]))
        progress(f"  {name}: {time.perf_counter() - start:.1f} s")
    return rows


def markdown(rows: list[Row]) -> str:
    lines = ["| model | forced to PyTorch | strategy | engines | transitions | "
             "Torch-TensorRT | ours / peer |", "|---|---|---|---:|---:|---:|---:|"]
    for r in rows:
        peer = "" if r.peer is None else str(r.peer)
        ratio = "" if r.ratio is None else f"{r.ratio:.2f}"
        lines.append(f"| {r.model} | {r.forced} | {r.strategy} | {r.engines} | "
                     f"{r.transitions} | {peer} | {ratio} |")
    return "\n".join(lines)


def to_json(rows: list[Row]) -> list[dict]:
    return [asdict(r) for r in rows]


def from_json(items: list[dict]) -> list[Row]:
    return [Row(**item) for item in items]


def section(rows: list[Row]) -> list[str]:
    """The zoo report's section: what was measured, the verdict against the peer, the
    table."""
    above = [r for r in rows if r.peer is not None and r.engines > r.peer]
    compared = sum(r.peer is not None for r in rows)
    verdict = (f"All {compared} rows with a Torch-TensorRT count are at or below it."
               if not above else
               f"{len(above)} of {compared} rows with a Torch-TensorRT count are above it: "
               + ", ".join(f"{r.model} / {r.forced} / {r.strategy} {r.engines} vs {r.peer}"
                           for r in above) + ".")
    return [f"TensorRT engines and PyTorch<->TensorRT transitions per strategy, "
            f"min_block_size={MIN_BLOCK_SIZE}, nothing or one op forced to PyTorch (partition "
            "only); Torch-TensorRT's count is its fast partitioner's for our fast and "
            "dependency_aware, its global partitioner's for global (zoo/partition_anchor.py "
            "names the source). " + verdict, "", markdown(rows)]
