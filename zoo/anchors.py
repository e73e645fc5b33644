"""The anchor: Torch-TensorRT 2.13 with TensorRT-RTX on a 2-core CPU machine, fp32. Our
targets are half its time outside the TensorRT builder and at most 2x the fp32 weight bytes
of peak compile RSS (the anchor needs ~3.3x on GPT-2)."""

from __future__ import annotations

from typing import Any

MiB, GiB = 2**20, 2**30

# model -> {"outside_builder_s": seconds, "peak_rss_bytes": bytes} (fp32, default settings).
# Source: Torch-TensorRT 2.13 (TensorRT-RTX 1.5, torch 2.13, transformers 5.24.0) measured on a
# 2-core CPU machine, ../shared/reference/torch_tensorrt_2.13_rtx_cpu_measurements.jsonl and
# ../shared/peer/side_by_side.py (issue 25's table). The peer's models are its own builds
# (run_peer.py build_model: BERT-base BertModel and GPT-2 124M GPT2LMHeadModel at 128
# tokens); the zoo cells these rows are set beside run the zoo's entries (32 tokens), so
# the ratios are approximate; side_by_side.py compares like with like.
ANCHOR: dict[str, dict[str, float]] = {
    "resnet18": {"outside_builder_s": 1.5, "peak_rss_bytes": 186 * MiB},
    "mobilenet_v2": {"outside_builder_s": 3.5},
    "bert_base": {"outside_builder_s": 3.0},
    "gpt2": {"outside_builder_s": 4.2, "peak_rss_bytes": 1.6 * GiB},
}
TIME_TARGET = 0.5  # ours / anchor, time outside the builder
RSS_TARGET = 2.0  # ours / fp32 weight bytes, peak compile RSS above baseline
MIN_WEIGHTS = 1 * MiB  # below this, fixed costs dominate and RSS/weights means nothing


def anchor_rows(records: list[dict]) -> list[dict[str, Any]]:
    """One row per fp32 record (default strategy "fast" first, no resource partitioning) of
    every anchored model and every model with weights: our numbers and the ratios."""
    chosen: dict[str, dict] = {}
    for r in records:
        cell = r["cell"]
        if cell["precision"] != "fp32" or cell["resource_partitioning"] or cell.get("dynamic"):
            continue
        if r.get("status") != "ok" or "memory" not in r:
            continue
        name = cell["model"]
        if name not in chosen or (cell["strategy"] == "fast"
                                  and chosen[name]["cell"]["strategy"] != "fast"):
            chosen[name] = r
    rows = []
    for name, r in chosen.items():
        anchor = ANCHOR.get(name, {})
        weights = r["memory"]["weight_bytes"]
        ours_s = r["outside_builder_seconds"]
        rss = r["memory"]["peak_rss_bytes"]
        row = {"model": name, "strategy": r["cell"]["strategy"], "outside_builder_s": ours_s,
               "outside_builder_cpu_s": r.get("outside_builder_cpu_seconds"),
               "anchor_s": anchor.get("outside_builder_s"), "peak_rss_bytes": rss,
               "weight_bytes": weights, "anchor_rss_bytes": anchor.get("peak_rss_bytes"),
               "rss_per_weight": rss / weights if weights >= MIN_WEIGHTS else None,
               "time_ratio": None, "cpu_time_ratio": None, "anchor_rss_per_weight": None,
               "rss_vs_anchor": None}
        if row["anchor_s"]:
            row["time_ratio"] = ours_s / row["anchor_s"]
            if row["outside_builder_cpu_s"] is not None:
                row["cpu_time_ratio"] = row["outside_builder_cpu_s"] / row["anchor_s"]
        if row["anchor_rss_bytes"] and weights:
            row["anchor_rss_per_weight"] = row["anchor_rss_bytes"] / weights
            row["rss_vs_anchor"] = rss / row["anchor_rss_bytes"]
        rows.append(row)
    return sorted(rows, key=lambda row: (row["anchor_s"] is None, row["model"]))
