"""``ZOO``: every zoo model by name, and ``get(name)``."""

from __future__ import annotations

from .entry import ZooEntry
from .models import synthetic, transformers_models, vision

ZOO: dict[str, ZooEntry] = {
    e.name: e for e in [*vision.ENTRIES, *transformers_models.ENTRIES, *synthetic.ENTRIES]}

QUICK = ("resnet18", "mobilenet_v2", "bert_2layer", "gpt2_2layer", "llama_2layer",
         "qwen2_2layer", "t5_2layer", "lgamma_graph")


def get(name: str) -> ZooEntry:
    """The entry called ``name``; an unknown name raises KeyError listing the known ones."""
    try:
        return ZOO[name]
    except KeyError:
        raise KeyError(f"no zoo model {name!r}; known models: {', '.join(sorted(ZOO))}") from None


def select(names=None, tags=None) -> list[ZooEntry]:
    """Entries by name (in the order given) or by tag (any of ``tags``); all when neither."""
    if names:
        return [get(n) for n in names]
    if tags:
        return [e for e in ZOO.values() if set(tags) & set(e.tags)]
    return list(ZOO.values())

# The GPU latency set (issue 42): ``zoo save`` programs timed on a lent GPU against
# torch.compile's reduce-overhead and max-autotune; efficientnet_b0 is the model no earlier
# GPU run had.
GPU = ("resnet18", "resnet50", "bert_4layer", "bert_base_128", "mobilenet_v3_large",
       "efficientnet_b0")
# GPU entries that are a larger size of an architecture another entry already has (the
# same ops and the same graph up to sizes): whole-zoo CPU checks (tests/
# test_lowering_routes.py) run the smaller one only, to keep CI's minutes.
LARGER_OF = {"bert_base_128": "bert_base", "mobilenet_v3_large": "mobilenet_v3_small"}
