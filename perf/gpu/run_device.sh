#!/bin/bash
# Run on the GPU machine (issue 27): the environment, then `zoo latency` over the programs
# in $1 (a folder), records and log under $OUT (or out/). Usage: perf/gpu/run_device.sh DIR TAG
set -o pipefail
DIR=$1; TAG=${2:-run}; OUT=${OUT:-out}
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 -c "import torch; print('torch', torch.__version__, torch.version.cuda)"
python3 -c "import tensorrt" 2>&1 | tail -1; python3 -c "import tensorrt_rtx" 2>&1 | tail -1
python3 -c "import psutil, tqdm" 2>&1 | tail -1
python3 -m zoo latency "$DIR" --device cuda --out "$OUT/lat_$TAG.jsonl" ${EXTRA} 2>&1 \
  | grep -v "Warning\|warn(" | tee "$OUT/log_$TAG.txt"
