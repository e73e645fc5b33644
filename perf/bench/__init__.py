"""pytest-benchmark suites (``python -m perf.bench.run``, ``nox -s perf_bench``): each
benchmark's best time, also expressed as a ratio to a calibration workload measured in the
same run (``ratios``); ``synthetic_graphs`` builds the partitioner's scaling graphs. They
explore and explain; they gate nothing (the regression gate is perf/gate/)."""
