#!/bin/bash
# Run on the GPU machine (issue 27): the environment, then `zoo latency` of each program in
# $1 (a folder; one process per program, so a timeout loses only that one), records, logs
# and the combined table under $OUT (or out/). Usage: perf/studies/gpu/run_device.sh DIR TAG
# EXTRA: more `zoo latency` options (e.g. "--repeats 3"); PER: seconds per program (300).
set -o pipefail
DIR=$1; TAG=${2:-run}; OUT=${OUT:-out}
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 -c "import torch; print('torch', torch.__version__, torch.version.cuda)"
python3 -c "import tensorrt" 2>&1 | tail -1; python3 -c "import tensorrt_rtx" 2>&1 | tail -1
for p in "$DIR"/*.prog; do
  timeout "${PER:-300}" python3 -m zoo latency "$p" --device cuda --out "$OUT/lat_$TAG.jsonl" \
    ${EXTRA} 2>&1 | grep -v "Warning\|warn(" | grep -v "^|"
done | tee "$OUT/log_$TAG.txt"
python3 -c "import json, sys; from zoo import gpu_latency as g
print(g.markdown([json.loads(l) for l in open(sys.argv[1])]))" "$OUT/lat_$TAG.jsonl" \
  | tee "$OUT/lat_$TAG.md"
