"""End-to-end: the CI scenario (base 95e5feb, whose library cannot import cases/quantize.py)
with test-only slowdowns: elementwise +20%, quantize +30%, bert_2layer compile +30%."""
import sys, time
from pathlib import Path
from perf import history, noise, suites, gate as rules
from perf.gating import screen_run, confirm_run
from perf.worker import Pool
from perf.confirm import base_checkout

suite = suites.suite("quick")
runs = history.load_runs(suite=suite.name)
inject = {"family:elementwise": {"family": "elementwise", "slower": 0.2},
          "family:quantize": {"family": "quantize", "slower": 0.3},
          "compile:bert_2layer": {"compile_slower": 0.3}}
t = time.monotonic()
with base_checkout(sys.argv[1]) as tree, Pool() as pool, Pool(tree) as base:
    run = screen_run(suite, lambda: Pool(), runs, noise.load_calibration(),
                     history.load_annotations(), inject=inject)
    for row in run.chosen:
        print(f"suspect {row.name}: x{row.ratio:.3f}, {row.z:.1f} spreads")
    confirm_run(run, pool, lambda: base, inject=inject, out=print)
for s, why in run.unconfirmed.items():
    print(f"WARNING: suspect {s} left unconfirmed: {why[:300]}")
print("regressed:", run.regressed, f"({time.monotonic() - t:.0f} s)")
for r in run.rows:
    if any(k in r.name for k in ("elementwise", "composites", "quantize", "bert_2layer/cpu/total", "canary")):
        print(f"  {r.name}: x{r.ratio:.3f} z={r.z:.1f} {r.verdict}")
