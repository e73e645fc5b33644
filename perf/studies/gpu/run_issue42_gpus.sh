#!/bin/bash
# Issue 42's max-autotune table on a machine of several GPUs: `zoo latency` of each program in
# DIR against reduce-overhead and max-autotune, one process per program, PER_GPU processes on
# each GPU (CUDA_VISIBLE_DEVICES): the processes of one GPU take turns (--gpu-lock) for
# max-autotune's compile (it times candidate kernels on that GPU) and for the timed rounds;
# their other compiles overlap on the CPU. Programs are taken in the order of `ls DIR`
# (name them so that the slowest compiles come first). Records finished on this machine are
# kept in /tmp/issue42_done (a second call on the same warm machine skips those programs and
# reuses inductor's caches). Records, the log and the table come back under $OUT.
# Usage: perf/studies/gpu/run_issue42_gpus.sh DIR [TAG]; env: PER_GPU (2), REPEATS (3),
# THREADS (inductor compile workers per process, 8), TOTAL (seconds for all, 540), ANCHORS,
# NGPU (use GPUs 0..NGPU-1; default all). A call killed at TOTAL loses the unfinished programs.
set -o pipefail
DIR=$1; TAG=${2:-i42g}; export OUT=${OUT:-out} REPEATS=${REPEATS:-3}
export ANCHORS=${ANCHORS:-"reduce-overhead max-autotune"}
export PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=${THREADS:-8}
export GPUS=${NGPU:-$(nvidia-smi -L | wc -l)}; export SLOTS=$(( GPUS * ${PER_GPU:-2} ))
mkdir -p "$OUT" /tmp/issue42_done /tmp/issue42_slots
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
python3 -c "import torch; print('torch', torch.__version__, torch.version.cuda)"
one() {
  p=$1; name=$(basename "$p" .prog)
  [[ -s /tmp/issue42_done/$name.jsonl ]] && { echo "[$name] done earlier"; return; }
  for s in $(seq 0 $(( SLOTS - 1 ))); do  # a free slot: GPU = slot mod number of GPUs
    exec {fd}>"/tmp/issue42_slots/$s"
    if flock -n "$fd"; then break; fi
    exec {fd}>&-
  done
  gpu=$(( s % GPUS )); start=$(date +%s)
  CUDA_VISIBLE_DEVICES=$gpu python3 -m zoo latency "$p" --device cuda --repeats "$REPEATS" \
    --anchors $ANCHORS --gpu-lock "/tmp/issue42_gpu$gpu.lock" \
    --out "/tmp/issue42_rec_$name.jsonl" 2>&1 \
    | grep --line-buffered -v "Warning\|warn(\|^|\|^$\|^- \|^\[\|AUTOTUNE\|triton_\|strides:\|dtypes:\|Autotune\|num_choices" \
    | sed -u "s/^/[$name gpu$gpu] /"
  rc=${PIPESTATUS[0]}
  [[ $rc == 0 ]] && mv "/tmp/issue42_rec_$name.jsonl" /tmp/issue42_done/
  echo "[$name gpu$gpu] exit $rc after $(( $(date +%s) - start )) s"
}
export -f one
ls "$DIR"/*.prog | timeout "${TOTAL:-540}" xargs -P "$SLOTS" -I{} bash -c 'one {}' \
  | tee "$OUT/log_$TAG.txt"
cat /tmp/issue42_done/*.jsonl > "$OUT/lat_$TAG.jsonl"
python3 -c "import json, sys; from zoo import gpu_latency as g
print(g.markdown([json.loads(l) for l in open(sys.argv[1])]))" "$OUT/lat_$TAG.jsonl" \
  > "$OUT/lat_$TAG.md"
