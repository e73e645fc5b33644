"""The partition anchor table (issues 14, 25): for the models Torch-TensorRT 2.13 was measured
on, built exactly as it built them, and for ops forced to PyTorch, how many TensorRT engines
and PyTorch<->TensorRT transitions each of our strategies makes, beside Torch-TensorRT's own
partitioner on the same model.

Partition only (capture, lowering, capability, strategy; no engine is built), so the
numbers are machine-independent. ``torch-trt-ref zoo anchors`` prints the table (``--json``
keeps the rows); ``zoo run --full`` measures it too, and the zoo report shows it
(``section``)."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Callable

import torch

# Torch-TensorRT 2.13.0 + tensorrt_rtx 1.5, torch 2.13, transformers 5.24.0, min_block_size=5,
# its own partitioners (fast = adjacency, global) on its lowered graph: TensorRT subgraphs.
# Source: ../shared/reference/torch_tensorrt_2.13_rtx_cpu_measurements.jsonl, fields
# partitioners.mbs5 (nothing forced) and force_add_to_torch.mbs5 (aten.add.Tensor forced),
# re-measured 2026-11-26 with transformers 5.24.0 (../shared/peer/run_peer.py --skip-build,
# the venv of ../shared/peer/setup.sh): the same counts. Other forced ops were not measured.
PEER: dict[str, dict[str, tuple[int, int]]] = {  # model -> forced -> (fast, global)
    "resnet18": {"none": (1, 1), "aten.add.Tensor": (8, 8)},
    "mobilenet_v2": {"none": (1, 1), "aten.add.Tensor": (11, 11)},
    "efficientnet_b0": {"none": (1, 1), "aten.add.Tensor": (10, 10)},
    "vit_b_16": {"none": (1, 1), "aten.add.Tensor": (24, 24)},
    "bert_tiny_2l": {"none": (1, 1), "aten.add.Tensor": (5, 4)},
    "bert_base_12l": {"none": (1, 1), "aten.add.Tensor": (25, 24)},
    "gpt2_small": {"none": (1, 1), "aten.add.Tensor": (36, 36)},
    "t5_small_encoder": {"none": (1, 1), "aten.add.Tensor": (13, 13)},
    "hf_vit_base": {"none": (1, 1), "aten.add.Tensor": (25, 24)},
}
PEER_SOURCE = ("Torch-TensorRT 2.13 (TensorRT-RTX 1.5, torch 2.13, transformers 5.24.0) "
               "measured on a 2-core CPU machine")
FORCED = ("none", "aten.add.Tensor", "aten.gelu.default", "aten.native_layer_norm.default",
          "aten.mul.Tensor")
STRATEGIES = ("fast", "dependency_aware", "global")
MIN_BLOCK_SIZE = 5
SEQ = 128


class _Tensors(torch.nn.Module):
    """What the peer exports of a transformers model (run_peer.py's output adapter): the
    tensors of its output's ``to_tuple()``, so BERT's and ViT's pooler stay in the graph."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.inner = model

    def forward(self, *args):
        out = self.inner(*args)
        if isinstance(out, torch.Tensor):
            return out
        return tuple(t for t in out.to_tuple() if isinstance(t, torch.Tensor))


def peer_models() -> dict[str, Callable[[], tuple[torch.nn.Module, torch.Tensor]]]:
    """The peer's exact models (run_peer.py ``build_model``, names as there): torchvision
    with weights=None on a 1x3x224x224 image; transformers from their published configs
    (random weights, default sdpa attention), 128 tokens; GPT-2 is GPT2LMHeadModel with its
    head, use_cache=False."""
    import torchvision
    import transformers

    transformers.logging.set_verbosity_error()
    image = torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(0))
    ids = torch.randint(0, 1000, (1, SEQ), generator=torch.Generator().manual_seed(0))
    bert = dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                intermediate_size=3072)

    def text(model):
        return _Tensors(model), ids

    def vision(name):
        return lambda: (getattr(torchvision.models, name)(weights=None), image)

    return {
        **{name: vision(name) for name in ("resnet18", "mobilenet_v2", "efficientnet_b0",
                                           "vit_b_16")},
        "bert_tiny_2l": lambda: text(transformers.BertModel(transformers.BertConfig(
            hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
            intermediate_size=512))),
        "bert_base_12l": lambda: text(transformers.BertModel(transformers.BertConfig(**bert))),
        "gpt2_small": lambda: text(transformers.GPT2LMHeadModel(transformers.GPT2Config(
            n_layer=12, n_embd=768, n_head=12, vocab_size=50257, n_positions=1024,
            use_cache=False))),
        "t5_small_encoder": lambda: text(transformers.T5EncoderModel(transformers.T5Config(
            d_model=512, d_kv=64, d_ff=2048, num_layers=6, num_heads=8, vocab_size=32128,
            feed_forward_proj="relu", use_cache=False))),
        "hf_vit_base": lambda: (_Tensors(transformers.ViTModel(transformers.ViTConfig(
            hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
            intermediate_size=3072, image_size=224, patch_size=16), add_pooling_layer=True)),
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
    precision: str = "fp32"  # int8/fp8/nvfp4: the model quantized first (zoo.quantized)

    @property
    def ratio(self) -> float | None:
        return self.engines / self.peer if self.peer else None


def measure(models: list[str] | None = None, progress: Callable[[str], None] = print,
            precision: str = "fp32") -> list[Row]:
    """The rows of ``models`` (default: all); ``precision`` int8/fp8/nvfp4 quantizes each
    model first as the zoo's quantized cells do (the peer's counts are its fp32 ones:
    quantization must not add engines)."""
    from torch_trt_ref.capture import capture
    from torch_trt_ref.compiler import lower_program
    from torch_trt_ref.partitioning import partition
    from torch_trt_ref.settings import CompilationSettings

    rows = []
    for name, make in peer_models().items():
        if models and name not in models:
            continue
        start = time.perf_counter()
        torch.manual_seed(0)
        model, example = make()
        if precision != "fp32":
            from .quantized import prepare

            model, _ = prepare(model.eval(), precision, (example,), {})
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
                                None if peer is None else peer[strategy == "global"],
                                precision))
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
            "dependency_aware, its global partitioner's for global; the peer's exact model "
            f"builds; {PEER_SOURCE} (zoo/partition_anchor.py names the source). " + verdict,
            "", markdown(rows)]
