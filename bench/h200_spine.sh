#!/usr/bin/env bash
# Issue 10/13 on the GPU machine: build, GPU tests (slices to cuda:0 and the
# GDS path in cuFile's compatibility mode), and the spine's benchmarks. Logs
# and a summary go to $OUT; every command is echoed (set -x) into the logs.
#
#   bash bench/h200_spine.sh [STAGE...]      (default: every stage, in order)
#
# Stages (each fits one 10-minute device call; run them one per call if
# the whole script does not fit):
#   build      configure + build (Release, Python module) into build-gpu
#   tests      ctest -L gpu (gpu_tests: SpineTest.* slices bit-exact on
#              cuda:0, GdsCompatTest.* the GDS code in cuFile's compatibility
#              mode: registration, odd offsets, partial reads, slices as row
#              runs, error paths), then the GDS compat tests again verbosely
#   load7      Llama-2-7B layout through the CLI: page cache (warm) and tmpfs,
#              3 rounds each (must stay >= 50 GB/s), and cold against the raw
#              O_DIRECT read (`weightlift bench --mode cold`); also one
#              `weightlift load --gds compat` (its speed is NOT GDS's)
#   slices     bench/slice_bench.py: a row and a column slice of a
#              4096 x 11008 bf16 tensor to cuda:0, weightlift vs safetensors
#              get_slice + .to("cuda") in the same run (must be >= 5x)
#   firstcall  bench/first_call.py in 3 fresh processes: the first
#              load_checkpoint(dir, device="cuda:0") end to end against the
#              pinned-copy ceiling (must be >= 0.9x), and later calls
# Carry `.deps` (CLI11, liburing) with the call, as for h200_run.sh.
set -u -o pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$ROOT/build-gpu
OUT=${OUT:-$ROOT/gpu-out}
mkdir -p "$OUT"
SUMMARY=$OUT/spine_summary.txt
say() { echo "$*" | tee -a "$SUMMARY"; }
WL=$BUILD/weightlift
export PYTHONUNBUFFERED=1
export PYTHONPATH=$BUILD/python${PYTHONPATH:+:$PYTHONPATH}
DISK=/var/tmp/wl_llama2-7b
SHM=/dev/shm/wl_llama2-7b

say "== h200_spine.sh ${*:-all} $(date -u +%FT%TZ) commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null)"
say "host: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB RAM;" \
    "$(nvidia-smi --query-gpu=name,memory.total,driver_version \
       --format=csv,noheader 2>&1)"
[ -e /proc/driver/nvidia-fs ] && say "nvidia-fs: loaded" || say "nvidia-fs: absent (GDS only in compatibility mode)"
say "libcufile: $(ldconfig -p 2>/dev/null | grep -m1 -o 'libcufile.so.0.*' || echo 'not in ldconfig')"

stage_build() {
  say "-- build"
  (set -x
   cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
     -DWL_BUILD_PYTHON=ON -DPython_EXECUTABLE="$(command -v python3)" &&
   ninja -C "$BUILD" -j"$(nproc)") > "$OUT/spine_build.log" 2>&1 \
    && say "build ok" \
    || { say "BUILD FAILED (tail of spine_build.log:)"; tail -30 "$OUT/spine_build.log" | tee -a "$SUMMARY"; return 1; }
}

stage_tests() {
  say "-- GPU tests"
  (set -x; timeout 400 ctest --test-dir "$BUILD" -L gpu --output-on-failure) \
    > "$OUT/spine_tests.log" 2>&1
  say "ctest -L gpu: $(grep -E 'tests passed|tests failed' "$OUT/spine_tests.log" | tail -1)"
  grep -E "^\s*[0-9]+ - .*(Failed|Skipped)" "$OUT/spine_tests.log" | tee -a "$SUMMARY"
  (set -x; timeout 200 "$BUILD/tests/gpu/gpu_tests" \
     --gtest_filter='GdsCompatTest.*:SpineTest.*') > "$OUT/spine_gds_compat.log" 2>&1
  say "gds compat + slices (verbose, spine_gds_compat.log): $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$OUT/spine_gds_compat.log" | tr '\n' ' ')"
  grep -E "cannot run here|SKIPPED|Failure" -A2 "$OUT/spine_gds_compat.log" | head -20 | tee -a "$SUMMARY"
}

synth7() {
  if [ ! -f "$DISK/.synth-ok" ]; then
    rm -rf "$DISK"; mkdir -p "$DISK"
    "$WL" synth --layout llama2-7b "$DISK" && touch "$DISK/.synth-ok"
  fi
  [ -f "$SHM/.synth-ok" ] || { rm -rf "$SHM"; cp -r "$DISK" "$SHM"; }
}

stage_load7() {
  say "-- load7 (Llama-2-7B layout, CLI)"
  (set -x
   synth7
   cat "$DISK"/*.safetensors > /dev/null   # page cache
   for i in 1 2 3; do "$WL" load "$DISK" --device cuda:0; done
   for i in 1 2 3; do "$WL" load "$SHM" --device cuda:0; done
   sync; echo 3 > /proc/sys/vm/drop_caches
   "$WL" bench "$DISK" --device cuda:0 --repeat 1 --mode cold
   cat "$DISK"/*.safetensors > /dev/null
   "$WL" load "$DISK" --device cuda:0 --gds compat
  ) > "$OUT/spine_load7.log" 2>&1
  say "page cache then tmpfs (GB/s per round):" \
      "$(grep -E '^device cuda' "$OUT/spine_load7.log" | head -6 | grep -oE '\([0-9.]+ GB/s\)' | tr '\n' ' ')"
  grep -E "weightlift loader|ceiling|loader /|raw" "$OUT/spine_load7.log" | head -12 | tee -a "$SUMMARY"
  say "gds compat load (NOT a GDS speed): $(grep -E '^device cuda' "$OUT/spine_load7.log" | tail -1)"
  grep -E "gds-compat|gds=compat" "$OUT/spine_load7.log" | head -3 | tee -a "$SUMMARY"
}

stage_slices() {
  say "-- slices (4096 x 11008 bf16 to cuda:0)"
  (set -x; timeout 300 python3 "$ROOT/bench/slice_bench.py" --device cuda:0 --repeat 7) \
    > "$OUT/spine_slices.log" 2>&1
  grep -E "slice|report" "$OUT/spine_slices.log" | grep -v "^+" | tee -a "$SUMMARY"
}

stage_firstcall() {
  say "-- firstcall (fresh processes, load_checkpoint to cuda:0)"
  (set -x
   synth7
   cat "$DISK"/*.safetensors > /dev/null
   for i in 1 2 3; do timeout 120 python3 "$ROOT/bench/first_call.py" "$DISK" --device cuda:0 --calls 3; done
  ) > "$OUT/spine_firstcall.log" 2>&1
  grep -E "ceiling|^call" "$OUT/spine_firstcall.log" | tee -a "$SUMMARY"
}

STAGES=${*:-build tests load7 slices firstcall}
for s in $STAGES; do
  "stage_$s" || say "stage $s: FAILED (see its log in $OUT)"
done
say "== done $(date -u +%FT%TZ)"
