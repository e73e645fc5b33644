#!/bin/bash
# Issue 42 on the GPU machine: `zoo latency` of each program in DIR against torch.compile's
# anchors, one process per program, JOBS processes side by side: they take turns (--gpu-lock)
# for the timed rounds and for max-autotune's compile, which times kernels on the GPU; the
# other compiles overlap (CPU). Programs whose file name matches the regex MA also time
# max-autotune. Records (one JSON-lines file), the log and the table come back under $OUT.
# Usage: perf/studies/gpu/run_issue42.sh DIR [TAG]; env: JOBS (3), MA (none), PER (seconds per
# program, 420), REPEATS (3), THREADS (inductor compile workers per process, 5), TOTAL
# (seconds for all programs, 530: what finished by then is merged and comes back).
set -o pipefail
DIR=$1; TAG=${2:-i42}; export OUT=${OUT:-out} MA PER=${PER:-420} REPEATS=${REPEATS:-3}
export PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=${THREADS:-5}
mkdir -p "$OUT" /tmp/issue42_rec
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
python3 -c "import torch; print('torch', torch.__version__, torch.version.cuda)"
one() {
  p=$1; name=$(basename "$p" .prog); anchors="inductor reduce-overhead"
  if [[ -n "$MA" && $name =~ $MA ]]; then anchors="$anchors max-autotune"; fi
  start=$(date +%s)
  timeout "$PER" python3 -m zoo latency "$p" --device cuda --repeats "$REPEATS" \
    --anchors $anchors --gpu-lock /tmp/issue42_gpu.lock --out "/tmp/issue42_rec/$name.jsonl" 2>&1 \
    | grep -v "Warning\|warn(\|^|\|^$\|^- \|^\[" | sed "s/^/[$name] /"
  echo "[$name] exit ${PIPESTATUS[0]} after $(( $(date +%s) - start )) s"
}
export -f one
ls "$DIR"/*.prog | timeout "${TOTAL:-530}" xargs -P "${JOBS:-3}" -I{} bash -c 'one {}' \
  | tee "$OUT/log_$TAG.txt"
cat /tmp/issue42_rec/*.jsonl > "$OUT/lat_$TAG.jsonl"; rm -rf /tmp/issue42_rec
python3 -c "import json, sys; from zoo import gpu_latency as g
print(g.markdown([json.loads(l) for l in open(sys.argv[1])]))" "$OUT/lat_$TAG.jsonl" \
  | tee "$OUT/lat_$TAG.md"
