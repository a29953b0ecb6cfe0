#!/usr/bin/env bash
# One script for the GPU machine (H200): build, run the GPU and unit tests,
# synthesize Llama-2-7B into /dev/shm and onto disk, run the CUDA sweep.
#
#   bash bench/gpu_run.sh [all|build|test|sweep|quick]
#
# all (default): build + tests + full sweep (~8 min on the H200);
# quick: build + GPU tests + a reduced sweep (~4 min);
# build / test / sweep: one stage (sweep and test expect a finished build).
# Logs go to $OUT (default ./gpu-out), at most 8 files:
#   build.log gpu_tests.log unit_tests.log synth.log sweep.log summary.txt
# Extra sweep arguments: WL_SWEEP_ARGS="--chunks 2,4 --threads 16".
set -u -o pipefail
STAGE=${1:-all}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$ROOT/build-gpu
OUT=${OUT:-$ROOT/gpu-out}
mkdir -p "$OUT"
SUMMARY=$OUT/summary.txt
: > "$SUMMARY"
say() { echo "$*" | tee -a "$SUMMARY"; }
JOBS=$(nproc)

say "== weightlift gpu_run.sh stage=$STAGE $(date -u +%FT%TZ)"
say "host: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB RAM"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader \
  2>&1 | sed 's/^/gpu: /' | tee -a "$SUMMARY"
[ -e /proc/driver/nvidia-fs ] && say "nvidia-fs: loaded" || say "nvidia-fs: absent"

build() {
  say "-- build (Release, build-gpu)"
  if ! { cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
           -DWL_BUILD_PYTHON=OFF && ninja -C "$BUILD" -j"$JOBS"; } \
       > "$OUT/build.log" 2>&1; then
    say "BUILD FAILED (tail of build.log):"
    tail -40 "$OUT/build.log" | tee -a "$SUMMARY"
    # Still try the CUDA targets alone, so the GPU tests can run.
    if ninja -C "$BUILD" -j"$JOBS" gpu_tests gpu_sweep cuda_tests \
         >> "$OUT/build.log" 2>&1; then
      say "CUDA targets built despite the failure above"
    else
      return 1
    fi
  fi
  say "build ok"
}

tests() {
  say "-- GPU tests: ctest -L gpu"
  timeout 300 ctest --test-dir "$BUILD" -L gpu --output-on-failure \
    > "$OUT/gpu_tests.log" 2>&1
  say "gpu tests exit $?: $(grep -E 'tests passed|tests failed' \
    "$OUT/gpu_tests.log" | tail -1)"
  grep -E '^(host_register|cold|gds auto|OOM|truncated|pinned|note):' \
    "$OUT/gpu_tests.log" | head -20 >> "$SUMMARY"
  # The binary's own verbose output (PASS/FAIL per test with details).
  "$BUILD/tests/gpu/gpu_tests" >> "$OUT/gpu_tests.log" 2>&1
  if [ "$STAGE" != quick ]; then
    say "-- unit tests: ctest -L unit"
    timeout 300 ctest --test-dir "$BUILD" -L unit --output-on-failure -j"$JOBS" \
      > "$OUT/unit_tests.log" 2>&1
    say "unit tests exit $?: $(grep -E 'tests passed|tests failed' \
      "$OUT/unit_tests.log" | tail -1)"
  fi
}

synth_one() {  # DIR
  local dir=$1
  if [ -f "$dir/model.safetensors.index.json" ]; then
    echo "reusing $dir" >> "$OUT/synth.log"; return 0
  fi
  mkdir -p "$dir"
  if [ -x "$BUILD/weightlift" ] && \
     "$BUILD/weightlift" synth --layout llama2-7b "$dir" \
       >> "$OUT/synth.log" 2>&1; then
    return 0
  fi
  echo "weightlift synth unavailable or failed; using gpu_sweep --synth" \
    >> "$OUT/synth.log"
  rm -rf "$dir"; mkdir -p "$dir"
  "$BUILD/bench/gpu_sweep" --synth "$dir" >> "$OUT/synth.log" 2>&1
}

sweep() {
  local shm=/dev/shm/wl_llama2_7b disk=/var/tmp/wl_llama2_7b
  say "-- synth llama2-7b into $shm and $disk"
  synth_one "$shm" || { say "synth to $shm failed"; tail "$OUT/synth.log" | tee -a "$SUMMARY"; return 1; }
  synth_one "$disk" || say "synth to $disk failed (cold runs skipped)"
  local args=()
  if [ "$STAGE" = quick ]; then
    args=(--chunks 1,2,4,8,32 --threads 8,16 --slots 2,4 --pieces 64,256
          --hr-threads 8,16 --runs 2)
  fi
  local cold=()
  [ -f "$disk/model.safetensors.index.json" ] && cold=(--cold-dir "$disk")
  say "-- sweep: gpu_sweep --dir $shm ${cold[*]} ${args[*]} ${WL_SWEEP_ARGS:-}"
  # shellcheck disable=SC2086
  timeout 540 "$BUILD/bench/gpu_sweep" --dir "$shm" "${cold[@]}" "${args[@]}" \
    ${WL_SWEEP_ARGS:-} 2>&1 | tee "$OUT/sweep.log" | \
    grep -E '^(pinned|page-cache|best|RECOMMEND|defaults|naive|raw|cold)' \
    >> "$SUMMARY"
  say "sweep exit ${PIPESTATUS[0]}"
}

case "$STAGE" in
  build) build ;;
  test) tests ;;
  sweep) sweep ;;
  quick) build && tests && sweep ;;
  all) build && tests && sweep ;;
  *) echo "unknown stage $STAGE"; exit 2 ;;
esac
say "== done $(date -u +%FT%TZ)"
cat "$SUMMARY"
