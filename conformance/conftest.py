"""Collects conformance outcomes per cell and writes them as JSON (--conformance-json)."""

from __future__ import annotations

import json
import os

import pytest

_RESULTS: dict[str, dict] = {}


def pytest_addoption(parser):
    parser.addoption("--conformance-json", default=None,
                     help="write per-cell conformance outcomes to this JSON file")


def _record(report) -> None:
    if "test_op[" not in report.nodeid:
        return
    cell = report.nodeid.split("test_op[", 1)[1].rstrip("]")
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        outcome = "xfail" if hasattr(report, "wasxfail") and report.skipped else \
            "fail" if report.failed else report.outcome
        entry = {"outcome": outcome}
        if outcome == "xfail":
            entry["reason"] = report.wasxfail
        elif outcome == "fail":
            entry["error"] = str(report.longrepr).splitlines()[-1][:300] if report.longrepr else ""
        accuracy = dict(report.user_properties).get("accuracy")
        if accuracy:
            entry["accuracy"] = accuracy
        _RESULTS[cell] = entry


@pytest.hookimpl(trylast=True)
def pytest_runtest_logreport(report):
    _record(report)


def pytest_sessionfinish(session):
    path = session.config.getoption("--conformance-json")
    if not path or hasattr(session.config, "workerinput"):
        return
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w") as f:
        json.dump({"cells": _RESULTS}, f, indent=1, sort_keys=True)
