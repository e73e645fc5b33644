"""Report rendering (markdown, HTML, plots, anchor ratios) on hand-made records."""

import pytest

from zoo.anchors import ANCHOR, anchor_rows
from zoo.html import write_html
from zoo.plots import FIGURES
from zoo.report import markdown
from zoo.schema import SCHEMA_VERSION, read_records, write_record

MiB = 2**20


def record(model="resnet18", strategy="fast", precision="fp32", rp=False, outside=0.6,
           rss=90 * MiB, weights=45 * MiB, engines=3, largest=20 * MiB, budget=None):
    key = f"{model}/{strategy}{'+rp' if rp else ''}/{precision}"
    eng = {"count": engines, "plan_bytes": 10 * MiB, "weight_bytes": weights,
           "largest_weight_bytes": largest}
    if budget is not None:
        eng["engine_memory_budget"] = budget
    return {
        "schema_version": SCHEMA_VERSION, "run_id": "r1", "status": "ok", "error": None,
        "cell": {"key": key, "model": model, "strategy": strategy, "precision": precision,
                 "resource_partitioning": rp, "dynamic": False},
        "env": {"torch": "2.x", "tensorrt_backend": "tensorrt_rtx", "tensorrt": "1.7",
                "cpu": "test cpu", "cpu_count": 2, "memory_bytes": 2**34},
        "partition": {"engines": engines, "torch_segments": 2, "transitions": 4,
                      "fallbacks": {}},
        "ops": {"supported": 80, "total": 91, "unsupported": {"aten.lgamma.default": 3},
                "reasons": {"aten.lgamma.default": ["no converter for aten.lgamma.default"]}},
        "phases": {"capture": outside / 2, "lowering": outside / 2, "partition": 0.0,
                   "conversion": 0.0, "build": 1.5},
        "outside_builder_seconds": outside, "outside_builder_cpu_seconds": outside / 2,
        "engines": eng,
        "memory": {"peak_rss_bytes": rss, "weight_bytes": weights,
                   "peak_by_phase": {"capture": 10 * MiB, "lowering": 20 * MiB,
                                     "partition": 20 * MiB, "conversion+build": rss}},
        "latency": {"median_s": 0.02, "p90_s": 0.03, "executor": "reference", "device": "cpu"},
        "eager_latency": {"median_s": 0.01},
        "accuracy": {"max_abs_error": 1e-5, "cosine": 1.0, "rule": "float64",
                     "compiled_rmse": 2e-7, "eager_rmse": 1e-7, "ratio": 2.0,
                     "allowed": 2.5e-7, "passed": True, "tolerance": 1e-3},
    }


def failed(model="gpt2_2layer"):
    return {"schema_version": SCHEMA_VERSION, "run_id": "r1", "status": "error",
            "cell": {"key": f"{model}/fast/fp32", "model": model, "strategy": "fast",
                     "precision": "fp32", "resource_partitioning": False},
            "error": {"stage": "compile", "type": "KeyError", "message": "'fast'\nmore"}}


def sweep():
    return [record(), record(strategy="dependency_aware", engines=2),
            record(precision="fp16", rss=50 * MiB),
            record(rp=True, engines=5, largest=8 * MiB, budget=10 * MiB, rss=60 * MiB),
            failed()]


def test_anchor_ratios_are_ours_over_anchor_and_rss_over_weights():
    rows = {r["model"]: r for r in anchor_rows(sweep())}
    row = rows["resnet18"]
    assert row["strategy"] == "fast"  # the default strategy represents the model
    assert row["time_ratio"] == pytest.approx(0.6 / ANCHOR["resnet18"]["outside_builder_s"])
    assert row["cpu_time_ratio"] == pytest.approx(0.3 / ANCHOR["resnet18"]["outside_builder_s"])
    assert row["rss_per_weight"] == pytest.approx(2.0)
    assert row["anchor_rss_per_weight"] == pytest.approx(186 / 45)
    assert row["rss_vs_anchor"] == pytest.approx(90 / 186)  # record(): 2.0 x 45 MiB
    assert "gpt2_2layer" not in rows  # failed cells have no numbers


def test_builder_floor_note_only_when_a_model_is_over_the_rss_target():
    assert "builder alone" not in markdown(sweep())  # resnet18 at exactly 2.0x
    over = markdown([record(rss=216 * MiB)])
    assert "| 4.80 ✗ |" in over and "TensorRT-RTX builder alone" in over


def test_markdown_report_sections():
    md = markdown(sweep())
    assert md.startswith("# Model zoo report")
    for section in ("## Cells", "## Ratios vs the anchor", "## Peak compile memory by phase",
                    "## Resource partitioning", "## Unsupported ops", "## Failures and fallbacks"):
        assert section in md
    assert "| resnet18 | fast | fp32 | ok | 3 | 2 | 4 | 80/91 |" in md
    assert "0.40 / 0.20 ✓" in md  # wall 0.6 s / 1.5 s, CPU 0.3 s / 1.5 s
    assert "| aten.lgamma.default | 3 |" in md
    assert "`gpt2_2layer/fast/fp32` error at compile: KeyError: 'fast'" in md
    assert "| resnet18 | fast | fp32 | 10.0 | - | 3 | 5 | 20.0 | 8.0 ✓ | 90.0 | 60.0 |" in md
    assert "reference on cpu" in md
    assert "| resnet18 | fast | 45.0 | 10.0 | 20.0 | 20.0 | 90.0 | 90.0 | 10.0 |" in md


def test_html_report_embeds_every_plot(tmp_path):
    path = write_html(sweep(), tmp_path / "zoo.html")
    page = path.read_text()
    assert page.count("data:image/png;base64,") == len(FIGURES)
    assert "<table>" in page and "resnet18" in page
    for name in FIGURES:
        png = (tmp_path / f"zoo_{name}.png").read_bytes()
        assert png.startswith(b"\x89PNG")


def test_plots_without_data_are_skipped():
    assert all(fn([failed()]) is None for fn in FIGURES.values())


def test_records_round_trip_and_schema_is_checked(tmp_path):
    path = tmp_path / "r.jsonl"
    for r in sweep():
        write_record(path, r)
    assert read_records(path) == sweep()
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"schema_version": 999}\n')
    with pytest.raises(ValueError, match="schema_version 999"):
        read_records(bad)


def test_cells_show_compiled_and_eager_error_and_flag_the_rule():
    bad = record(model="bert_2layer")
    bad["accuracy"].update(compiled_rmse=3e-7, ratio=3.0, passed=False,
                           message="output 0: RMSE vs float64 3e-07 > allowed 2.5e-07")
    text = markdown([record(), bad])
    assert "RMSE vs fp64: compiled / eager (ratio)" in text
    assert "| 2e-07 / 1e-07 (2.00) |" in text
    assert "| 3e-07 / 1e-07 (3.00) ✗ |" in text
    assert "`bert_2layer/fast/fp32` fails the accuracy rule: output 0: RMSE" in text


def test_version_1_records_are_read_with_their_tolerance_verdict(tmp_path):
    old = record()
    old.update(schema_version=1, accuracy={"max_abs_error": 2e-3, "cosine": 1.0,
                                           "tolerance": 1e-3, "within_tolerance": False})
    path = tmp_path / "v1.jsonl"
    write_record(path, old)
    (read,) = read_records(path)
    assert read["accuracy"]["passed"] is False and read["accuracy"]["rule"] == "tolerance"
    assert "tolerance 0.001 ✗" in markdown([read])


def test_partition_anchor_section_flags_rows_above_the_peer(tmp_path):
    """Hand-made anchor rows: the report names the one row above Torch-TensorRT's count
    (27 engines vs 25), and ``zoo report --partition-anchor`` reads the rows back from the
    JSON ``zoo anchors --json`` writes."""
    import json

    from torch_trt_ref.cli import main
    from zoo.partition_anchor import Row, to_json

    rows = [Row("bert_base", "aten.add.Tensor", "fast", 24, 48, 25),
            Row("bert_base", "aten.add.Tensor", "global", 27, 53, 25),
            Row("bert_base", "aten.gelu.default", "fast", 13, 24, None)]
    text = markdown([record()], partition_anchor=rows)
    assert "## Partition anchor: engines beside Torch-TensorRT's" in text
    assert "1 of 2 rows with a Torch-TensorRT count are above it: bert_base / " \
           "aten.add.Tensor / global 27 vs 25." in text
    assert "| bert_base | aten.add.Tensor | fast | 24 | 48 | 25 | 0.96 |" in text
    assert "Partition anchor" not in markdown([record()])
    records, anchor = tmp_path / "r.jsonl", tmp_path / "anchor.json"
    write_record(records, record())
    anchor.write_text(json.dumps(to_json(rows[:1])))
    out = tmp_path / "report.md"
    assert main(["zoo", "report", str(records), "--markdown", str(out),
                 "--partition-anchor", str(anchor)]) == 0
    assert "All 1 rows with a Torch-TensorRT count are at or below it." in out.read_text()
    anchor.write_text("[{\"model\": 1}]")
    assert main(["zoo", "report", str(records), "--partition-anchor", str(anchor)]) == 2
