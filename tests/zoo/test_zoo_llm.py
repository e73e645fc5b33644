"""``zoo llm`` cells (zoo/llm_cells.py): one record per model x precision with the
engines, profiles, cache bytes, in-place outputs, latency summaries and the token count
equal to transformers' static-cache generate."""

from __future__ import annotations

import json

from zoo.cli import main


def test_llm_cell_record(tmp_path, capsys):
    out = tmp_path / "llm.jsonl"
    assert main(["llm", "--models", "gpt2", "--prompt-len", "4", "--new-tokens", "4",
                 "--hidden", "32", "--out", str(out)]) == 0
    (record,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert record["kind"] == "llm" and record["executor"] == "reference"
    assert (record["engines"], record["profiles"], record["in_place"]) == (1, 2, 4)
    # 2 layers x K, V x [1, 4 heads, 8 positions, 8] fp32
    assert record["cache_bytes"] == 4 * 4 * 8 * 8 * 4
    assert record["tokens_equal_to_transformers"] == 4
    assert record["decode_ms"]["median"] > 0 and record["prefill_ms"]["median"] > 0
    assert "tokens equal" in capsys.readouterr().out
