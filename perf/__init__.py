"""The performance harness, in three wings (docs/architecture.md "The harness's layers"):

- ``perf.gate``: the regression gate (``torch-trt-ref perf run|calibrate|gate|history``,
  docs/regressions.md): suites measured in fresh processes, screened against the run history,
  suspects confirmed A/B against the base commit. The one performance check CI runs.
- ``perf.bench``: pytest-benchmark suites (``python -m perf.bench.run``, ``nox -s
  perf_bench``): compile, conversion, executor, partitioning, refit and scale benchmarks
  written as pytest-benchmark JSON, each also as a ratio to a calibration workload of the
  same run.
- ``perf.studies``: one-off measurements behind numbers in the docs (the builder's memory
  floor, per-phase A/B of two trees, the side by side with Torch-TensorRT, declared ranges,
  the GPU runs).

``perf.cli`` registers the ``perf`` commands on ``torch-trt-ref``. Run data (the history,
results, baselines, the noise calibration) lives outside the package, in ``perf-data/``."""
