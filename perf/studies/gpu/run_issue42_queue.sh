#!/bin/bash
# Issue 42's max-autotune rows on one GPU inside a deadline: `zoo latency` of each program of
# QUEUE, one process at a time, in QUEUE's order, against reduce-overhead and max-autotune
# (ANCHORS). A QUEUE line is "PROGRAM.prog ESTIMATE_S": a program whose estimate is more than
# the time left before the deadline is skipped (a later, shorter one may still fit); one still
# running at the deadline is killed (its record is lost). The deadline is read again before
# each program and every 5 s while one runs, from the file DEADLINE (epoch seconds), so a
# later call can move it. Each finished program's record is kept as RESULTS/lat_NAME.jsonl
# (and .md) as soon as it ends; RESULTS/log.txt is the filtered log; RESULTS/DONE marks the
# end. Meant to be started detached (setsid nohup) and collected by later calls.
# Start it, its programs and the library it runs from a copy outside any folder the device calls
# carry: the next call's transfer replaces a carried folder, and the programs the queue has not
# started yet would find it gone (call K lost two that way).
# One queue per GPU: CUDA_VISIBLE_DEVICES=N with CACHE and RESULTS of its own.
# Inductor's local autotuning results (its cache/ folder: every operator's benchmarked choices,
# written as each operator is tuned, so also by a program killed at the deadline) are packed
# into RESULTS/autotune_cache.tgz after each program; SEED_CACHE=that file from an earlier
# call unpacks them first, so a later lease on the same GPU, driver and CUDA (inductor keys
# the file by them; another system's file is ignored) resumes a max-autotune compile where the
# earlier one stopped instead of benchmarking the same choices again.
# Usage: perf/studies/gpu/run_issue42_queue.sh QUEUE RESULTS DEADLINE; env: REPEATS (3),
# THREADS (inductor compile workers, 16), ANCHORS ("reduce-overhead max-autotune"),
# SEED_CACHE (a RESULTS/autotune_cache.tgz), CACHE (inductor's cache folder).
QUEUE=$1; RESULTS=$2; DEADLINE=$3
export PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=${THREADS:-16}
ANCHORS=${ANCHORS:-"reduce-overhead max-autotune"}
export TORCHINDUCTOR_CACHE_DIR=${CACHE:-/tmp/torchinductor_issue42}
mkdir -p "$RESULTS" "$TORCHINDUCTOR_CACHE_DIR"; LOG=$RESULTS/log.txt
if [[ -n $SEED_CACHE ]]; then tar xzf "$SEED_CACHE" -C "$TORCHINDUCTOR_CACHE_DIR"; fi
keep_cache() { [[ -d $TORCHINDUCTOR_CACHE_DIR/cache ]] && tar czf "$RESULTS/autotune_cache.tgz" \
  -C "$TORCHINDUCTOR_CACHE_DIR" cache; }
say() { echo "$(date -u +%H:%M:%S) $*" >> "$LOG"; }
tree() { local c; for c in $(pgrep -P "$1"); do tree "$c"; done; echo "$1"; }
left() { echo $(( $(cat "$DEADLINE") - $(date +%s) )); }
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader >> "$LOG"
python3 -c "import torch; print('torch', torch.__version__, torch.version.cuda)" >> "$LOG" 2>&1
while read -r prog estimate; do
  name=$(basename "$prog" .prog)
  if (( estimate > $(left) )); then
    say "[$name] skipped: estimate $estimate s, $(left) s left"; continue
  fi
  say "[$name] start ($(left) s left)"; start=$(date +%s)
  python3 -m zoo latency "$prog" --device cuda --repeats "${REPEATS:-3}" --anchors $ANCHORS \
    --out "$RESULTS/lat_$name.part.jsonl" < /dev/null > >(grep --line-buffered -v \
    "Warning\|warn(\|^|\|^$\|^- \|^\[\|AUTOTUNE\|triton_\|strides:\|dtypes:\|Autotune\|num_choices" \
    | sed -u "s/^/[$name] /" >> "$LOG") 2>&1 &
  job=$!  # the python process: at the deadline it and its descendants (compile workers) end
  while kill -0 "$job" 2>/dev/null; do
    if (( $(left) <= 0 )); then
      say "[$name] killed at the deadline"; kill -TERM $(tree "$job"); sleep 5
      kill -KILL $(tree "$job") 2>/dev/null
    fi
    sleep 5
  done
  wait "$job"; rc=$?
  if [[ -s $RESULTS/lat_$name.part.jsonl ]]; then
    mv "$RESULTS/lat_$name.part.jsonl" "$RESULTS/lat_$name.jsonl"
    mv "$RESULTS/lat_$name.part.md" "$RESULTS/lat_$name.md"
  fi
  keep_cache; say "[$name] exit $rc after $(( $(date +%s) - start )) s"
done < "$QUEUE"
say "queue done"; touch "$RESULTS/DONE"
