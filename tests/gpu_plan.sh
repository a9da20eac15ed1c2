#!/usr/bin/env bash
# One call on a GPU machine, in two phases, every result kept under OUT as it is made:
#   1. (nothing timed) the numeric tests under JAX and PyTorch (tests/gpu_tests.sh) beside the depth
#      ladder's 640-block cells (`keras-tse study depth_ladder --part gpu`) and the depth fixes' cells at 160
#      blocks, then at 320 (`keras-tse study depth_fixes`, `depth_fixes320`: rate grids, then verdict seeds);
#   2. (alone on the GPU) the ViT-80 train step under JAX profiled and timed as built and with scan
#      (tests/gpu_profile.py), then `keras-tse bench` under PyTorch compiled per block, timm beside it,
#      each only while the seconds left cover it.
#
# OUT gets one archive of everything (packed again after each step) and
# the summary lines.
#
#   bash tests/gpu_plan.sh OUT SECONDS        # run from the checkout, Keras importable, data in .data/
set -u
[ $# -eq 2 ] || { echo "usage: gpu_plan.sh OUT SECONDS; received $# arguments" >&2; exit 2; }
results=$1
end=$((SECONDS + $2))
out=$(mktemp -d)
mkdir -p "$results"
export XLA_PYTHON_CLIENT_PREALLOCATE=false TF_CPP_MIN_LOG_LEVEL=3 PYTHONUNBUFFERED=1 KERAS_TSE_DATA_DIR=$PWD/.data
left() { echo $((end - SECONDS)); }
pack() {
  tar czf "$results/results.tar.gz.part" -C "$out" . && mv "$results/results.tar.gz.part" "$results/results.tar.gz"
  cat "$out"/*.txt > "$results/summary.txt" 2>/dev/null
}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$out/device.txt" 2>&1

# --- 1: the suites and the ladder's cells share the GPU ---
phase1=$(( $(left) * 45 / 100 ))
GPU_TESTS_WORKERS=8 bash tests/gpu_tests.sh "$out/tests_jax" "$phase1" jax > "$out/tests_jax.txt" 2>&1 &
GPU_TESTS_WORKERS=4 bash tests/gpu_tests.sh "$out/tests_torch" "$phase1" torch > "$out/tests_torch.txt" 2>&1 &
timeout $((phase1 + 20)) python3 -m keras_tse.cli.main study depth_ladder --part gpu --jobs 6 \
  --budget-s "$phase1" --runs /tmp/ladder --out "$out/ladder" > "$out/ladder.txt" 2>&1 &
(fixes_end=$((SECONDS + phase1))  # the 160-block cells first, then the 320-block ones, in one budget
 for study in depth_fixes depth_fixes320; do
   budget=$((fixes_end - SECONDS))
   [ "$budget" -gt 60 ] || break
   timeout $((budget + 20)) python3 -m keras_tse.cli.main study "$study" --jobs 4 \
     --budget-s "$budget" --runs "/tmp/$study" --out "$out/$study" > "$out/$study.txt" 2>&1
 done) &
wait
mkdir -p "$out/ladder_runs" && cp /tmp/ladder/*.log "$out/ladder_runs/" 2>/dev/null
pack

# --- 2: alone on the GPU, each step only while the seconds left cover it ---
for variant in plain scan; do
  [ "$(left)" -gt 150 ] || break
  KERAS_BACKEND=jax timeout $(( $(left) - 60 )) python3 tests/gpu_profile.py "$out/profile_$variant.json" \
    --variants "$variant" > "$out/profile_$variant.txt" 2>&1
  pack
done
if [ "$(left)" -gt 90 ]; then
  KERAS_BACKEND=torch timeout $(( $(left) - 20 )) python3 -m keras_tse.cli.main bench \
    --cases vit_deescalate,timm_post,timm_pre --peer timm --dtype mixed_bfloat16 --jit-compile --isolate \
    --budget-s $(( $(left) - 40 )) --out "$out/bench_torch.json" > "$out/bench_torch.txt" 2>&1
fi
pack
echo "done with $(left) s left"
