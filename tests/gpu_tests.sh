#!/usr/bin/env bash
# The numeric tests (layers, blocks, similarity and spectra, models, callbacks, saving) under each backend
# on a GPU machine, every test's outcome written to OUT/<backend>.log as it ends (`-v`), so that a run
# stopped by its time limit still names each test that failed (one file a backend).
#
#   bash tests/gpu_tests.sh OUT SECONDS_PER_BACKEND [BACKEND ...]     # default: jax torch
#
# The GPU machines this ran on have no TensorFlow: the tests that load a file under it fail there by design.
set -u
[ $# -ge 2 ] || { echo "usage: gpu_tests.sh OUT SECONDS_PER_BACKEND [BACKEND ...]; received $# arguments" >&2; exit 2; }
out=$1
limit=$2
shift 2
files=(
  tests/test_de_escalation.py tests/test_blocks.py tests/test_similarity.py tests/test_spectral.py
  tests/test_self_attention.py tests/test_vit.py tests/test_transformer_xl.py tests/test_language_model.py
  tests/test_callbacks.py tests/test_escalation.py tests/test_attention_diagnostics.py
  tests/test_stochastic_depth.py tests/test_initializers.py tests/test_baselines.py tests/test_gpt.py
  tests/test_saving.py tests/test_generate.py tests/test_remat.py
)
# OUT is this script's own: a folder that holds anything (someone's files, an earlier run's) is refused.
if [ -e "$out" ] && [ -n "$(ls -A "$out" 2>/dev/null)" ]; then
  echo "$(basename "$0"): OUT $out is not empty; expected a new or empty folder" >&2
  exit 2
fi
mkdir -p "$out"
export XLA_PYTHON_CLIENT_PREALLOCATE=false TF_CPP_MIN_LOG_LEVEL=3 KERAS_TSE_ONE_BACKEND_TESTS=skip
backends=("$@")
[ ${#backends[@]} -eq 0 ] && backends=(jax torch)
for backend in "${backends[@]}"; do
  KERAS_BACKEND=$backend timeout "$limit" python3 -m pytest -v -n "${GPU_TESTS_WORKERS:-6}" -p no:cacheprovider --timeout 120 \
    "${files[@]}" > "$out/$backend.log" 2>&1
  code=$?
  echo "$backend: exit $code$([ $code -eq 124 ] && echo ' (stopped at the limit)'); $(grep -c ' PASSED ' "$out/$backend.log") passed, $(grep -c ' FAILED ' "$out/$backend.log") failed"
  grep ' FAILED ' "$out/$backend.log"
done
