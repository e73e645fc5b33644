"""The compile report's phases are exclusive (a phase opened inside another is not counted
in the outer one), so "build" is the TensorRT builder call alone and everything else a
compile does outside capture is in the other phases (issue 25's "outside the builder")."""

import itertools

import torch

import torch_trt_ref
from torch_trt_ref import report as report_module
from torch_trt_ref.report import PHASES, CompileReport


class _Clock:
    """A fake clock that moves one second per reading."""

    def __init__(self):
        self.ticks = itertools.count()

    def perf_counter(self):
        return float(next(self.ticks))

    process_time = perf_counter


def test_an_inner_phase_is_not_counted_in_the_outer_one(monkeypatch):
    monkeypatch.setattr(report_module, "time", _Clock())
    report = CompileReport()
    with report.phase("engine"):  # readings 0 (wall), 1 (cpu)
        with report.phase("build"):  # 2, 3 ... 4, 5: build is 2 s of wall and cpu
            pass
        with report.phase("build"):  # 6, 7 ... 8, 9: 2 more
            pass
    # engine closes at 10 (wall) and 11 (cpu): 10 - 0 - 4 = 6 and 11 - 1 - 4 = 6
    assert report.phases["build"] == 4.0 and report.phases_cpu["build"] == 4.0
    assert report.phases["engine"] == 6.0 and report.phases_cpu["engine"] == 6.0
    with report.phase("weights"):  # no phase open: nothing is subtracted
        pass
    assert report.phases["weights"] == 2.0


def test_build_is_the_builder_call_and_the_rest_is_outside_it():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU()).eval()
    compiled = torch_trt_ref.compile(model, [torch.randn(2, 8)], min_block_size=1)
    report = compiled.compile_report
    assert set(report.phases) == set(PHASES)
    builder_calls = sum(e.build_seconds for e in report.engines)
    # the builder call's window holds the "build" phase's and nothing else of ours
    assert 0 < report.phases["build"] <= builder_calls
    assert report.phases["engine"] > 0 and report.phases["weights"] > 0
    outside = report.seconds_outside_builder()
    assert outside == sum(v for k, v in report.phases.items() if k != "build")
    assert report.phases["engine"] + report.phases["weights"] < outside
