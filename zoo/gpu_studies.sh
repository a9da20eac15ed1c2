#!/usr/bin/env bash
# The CPU-sized cell studies on one GPU machine, all at once: zoo/ptb_warmup_study.py (its grid and its
# 32-block part) and zoo/tau_sweep_study.py, each resuming from the rows its result file already holds.
# Every 10 s their result files, logs and the GPU's load are copied into OUT, so that a run stopped by a
# time limit still returns every finished cell (a lent machine returns only what lies under OUT).
#
#   bash zoo/gpu_studies.sh OUT SECONDS [WORK]
#
# After SECONDS the studies are stopped; cells still running are lost (their rows were never written).
# The studies' cells are small (width 128 or 32): each runs in its own JAX process, many share the GPU,
# and their compiles share the CPU cores, so the tau sweep runs at nice 10 behind the language model.
set -u
[ $# -ge 2 ] || { echo "usage: gpu_studies.sh OUT SECONDS [WORK]; received $# arguments" >&2; exit 2; }
out=$1
limit=$2
work=${3:-$(mktemp -d)}
# OUT is this script's own: a folder that holds anything (someone's files, an earlier run's) is refused.
if [ -e "$out" ] && [ -n "$(ls -A "$out" 2>/dev/null)" ]; then
  echo "$(basename "$0"): OUT $out is not empty; expected a new or empty folder" >&2
  exit 2
fi
mkdir -p "$out" "$work"
export KERAS_BACKEND=jax XLA_PYTHON_CLIENT_PREALLOCATE=false TF_CPP_MIN_LOG_LEVEL=3 PYTHONUNBUFFERED=1
ptb=zoo/ptb_transformer_xl16/warmup_study.csv
tau=zoo/depth_study/tau_sweep.csv

alive() {
  for pid in $pids; do kill -0 "$pid" 2>/dev/null && return 0; done
  return 1
}

save() {
  for f in "$ptb" "$tau"; do [ -f "$f" ] && cp "$f" "$out/$(basename "$f")"; done
  nvidia-smi --query-gpu=timestamp,name,utilization.gpu,memory.used --format=csv,noheader >> "$out/gpu_load.csv" 2>&1
}

# Both parts of the PTB study append to one file: its header first, so that neither writes it twice.
[ -s "$ptb" ] || python3 -c "import sys; sys.path.insert(0, 'zoo'); import ptb_warmup_study as s
open(s.RESULTS, 'w').write(','.join(s.FIELDS) + '\\n')"
python3 zoo/ptb_warmup_study.py --part grid --jobs 12 --runs "$work/ptb" > "$out/ptb_grid.log" 2>&1 &
pids=$!
python3 zoo/ptb_warmup_study.py --part deep --jobs 9 --runs "$work/ptb" > "$out/ptb_deep.log" 2>&1 &
pids="$pids $!"
setsid nice -n 10 python3 zoo/tau_sweep_study.py --jobs 8 --runs "$work/tau" > "$out/tau_sweep.log" 2>&1 &
pids="$pids $!"
end=$((SECONDS + limit))
while alive && [ "$SECONDS" -lt "$end" ]; do
  sleep 10
  save
done
for pid in $pids; do pkill -P "$pid" 2>/dev/null; kill "$pid" 2>/dev/null; done
sleep 2
save
(cd "$work" && tar czf "$out/cell_logs.tar.gz" --wildcards -- */*.log 2>/dev/null)
rows() { if [ -f "$1" ]; then echo $(($(wc -l < "$1") - 1)); else echo 0; fi; }
echo "gpu_studies: $SECONDS s; rows: $(rows "$out/warmup_study.csv") PTB, $(rows "$out/tau_sweep.csv") tau sweep"
