"""Performance suites (pytest-benchmark) and their regression check against stored
baselines, judged as ratios to a calibration workload measured in the same run."""
