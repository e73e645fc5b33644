"""``zoo llm`` cells (zoo/llm_cells.py): one record per model x precision with the
engines, profiles, cache bytes, in-place outputs, latency summaries and the token count
equal to transformers' static-cache generate."""

from __future__ import annotations

import json

import pytest
import torch

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


def test_a_saved_decoder_is_timed_by_zoo_latency(tmp_path, capsys):
    """``zoo save --decoders`` writes the two-profile program, its decode-only step and a
    sidecar, without engine weights; ``zoo latency`` (here on the CPU, where the graphed and
    reduce-overhead variants are skipped) rebuilds the model from its seed, refits, judges
    every step's logits against eager float64 and times ours and transformers' generate."""
    folder = tmp_path / "programs"
    assert main(["save", str(folder), "--decoders", "gpt2", "--precisions", "fp32",
                 "--decoder-shape", "1", "32", "97", "--prompt-len", "4",
                 "--new-tokens", "3"]) == 0
    program = folder / "gpt2_1l-fp32.prog"
    assert program.exists() and program.with_suffix(".decode.ttrt").exists()
    assert json.loads(program.with_suffix(".json").read_text())["kind"] == "llm"
    out = tmp_path / "lat.jsonl"
    assert main(["latency", str(folder), "--device", "cpu", "--out", str(out)]) == 0
    (record,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert record["kind"] == "llm_latency" and record["status"] == "ok", record.get("error")
    assert record["env"]["torch"] == torch.__version__ and "tensorrt" in record["env"]
    assert record["accuracy"] == {"passed": True, "steps": 3, "failed": []}
    assert record["tokens_equal_hf_eager"] == {"ours_no_graph": 3}
    assert set(record["times"]) == {"ours_no_graph", "hf_eager"}
    assert record["skipped"] == ["ours_graph", "ours_graph_one_engine", "hf_reduce_overhead"]
    assert all(v["tokens_per_s"]["median"] > 0 for v in record["times"].values())
    assert "| gpt2_1l-fp32 | cpu | ok (3) |" in capsys.readouterr().out


def test_decoders_refuse_a_precision_they_do_not_compile_in(tmp_path):
    from zoo.llm_latency import save_decoders

    with pytest.raises(ValueError, match=r"decoders compile in \['bf16', 'fp16', 'fp32'\], "
                                         r"not \['int8'\]"):
        save_decoders(["gpt2"], ["int8"], tmp_path)


def test_the_quick_sweep_records_a_decoder_cell(tmp_path, monkeypatch):
    """``llm:gpt2`` (zoo.matrix.QUICK_LLM) runs in a sweep as any cell does: a record with
    status and env, its numbers under ``llm``; the report gives them their own table, and
    ``zoo compare --counts-only`` fails when an exact decoder count changes."""
    from zoo import compare as cmp
    from zoo import llm_cells
    from zoo.harness import sweep
    from zoo.matrix import QUICK_LLM, Cell, quick_matrix
    from zoo.report import markdown

    assert [c for c in quick_matrix() if c.is_llm] == [Cell("llm:gpt2", "fast", "fp32")]
    monkeypatch.setitem(llm_cells.SWEEP_SHAPE, "prompt_len", 4)  # the test's own budget
    monkeypatch.setitem(llm_cells.SWEEP_SHAPE, "new_tokens", 3)
    cells = [Cell(m, "fast", "fp32") for m in QUICK_LLM] + [Cell("llm:nope", "fast", "fp32")]
    records = sweep(cells, tmp_path / "zoo.jsonl", isolation="none", progress=False,
                    measure={"warmup": 0, "runs": 1, "max_seconds": 1.0})
    good, bad = records
    assert good["status"] == "ok" and good["kind"] == "llm", good["error"]
    m = good["llm"]
    assert (m["engines"], m["profiles"], m["in_place"], m["executor"]) == (1, 2, 4, "reference")
    # 2 layers x K, V x [1, 4 heads, 4 + 3 positions, 16] fp32
    assert m["cache_bytes"] == 4 * 4 * 7 * 16 * 4
    assert m["tokens_equal_to_transformers"] == 3
    assert m["prefill_ms"]["median"] > 0 and m["decode_ms"]["median"] > 0
    assert bad["status"] == "error" and "nope" in bad["error"]["message"]
    report = markdown(records)
    assert "## Decoder-LLM cells" in report and "| llm:gpt2/fast/fp32 | reference | 4 + 3 |" \
        in report
    assert "`llm:nope/fast/fp32` error at llm: ValueError" in report
    worse = json.loads(json.dumps(good))
    worse["llm"]["cache_bytes"] *= 2
    worse["llm"]["tokens_equal_to_transformers"] -= 1
    deltas = cmp.compare([good], [worse], counts_only=True)
    assert {(d.metric, d.verdict) for d in cmp.regressions(deltas)} == {
        ("llm_cache_bytes", cmp.CHANGED), ("llm_tokens_equal", cmp.REGRESSED)}
    assert not cmp.regressions(cmp.compare([good], [good], counts_only=True))
