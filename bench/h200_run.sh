#!/usr/bin/env bash
# Everything that needs the GPU machine, in stages that fit one 10-minute
# device call each. Logs go to $OUT (at most 8 files come back).
#
#   bash bench/h200_run.sh STAGE...
#
# Stages:
#   build    configure + build (Release, Python module on) into build-gpu
#   tests    GPU tests (ctest -L gpu), the NCCL group loads (dist_tests
#            Nccl*:LoadWithGroup*), Python tests on CUDA (incl. the
#            transformers end-to-end test), `verify --hash` cuda vs cpu
#   bench7   synth llama2-7b (tmpfs + disk), `weightlift bench` cold/warm
#            from disk and from tmpfs, against the ceilings and naive paths
#   compare7 bench/compare.py on llama2-7b (weightlift paths and the peers)
#   bench13 / compare13   the same for llama2-13b
#   e2e      compare.py on llama2-7b plus the time to the first token
#   cold7    `weightlift bench --mode cold` on llama2-7b only
#   coldpaths7  cold `weightlift load` per read backend (uring, pread,
#            direct), two interleaved rounds, on llama2-7b
#   host7    `weightlift bench --device cpu --mode warm` on llama2-7b: the
#            host loader against its warm references on this machine
#   first7   compare.py --modes first on llama2-7b: each method's first
#            call in a fresh process (CUDA context made before the clock),
#            against the pinned-copy ceiling; weightlift.load_checkpoint,
#            safetensors, fastsafetensors, runai, InstantTensor default and
#            buffered (wheels in .whl); FIRST_BUDGET seconds: rounds after
#            the first are left out when they would end past it
#   ttft7    bench/e2e_ttft.py on llama2-7b: time to the first token in a
#            fresh process, split into imports, model build, weights and
#            first token, transformers' from_pretrained against weightlift's
#   vllm7    bench/vllm_plugin.py on llama2-7b: the vLLM plugin's load path
#            (without vLLM) against vLLM's default safetensors feed, warm
#            (TP 1 and rank 1 of TP 4) and cold, with peak extra GPU memory
#   gdscompat  the GPU tests of slices to cuda:0 and of the GDS code in
#            cuFile's compatibility mode (SpineTest.*, GdsCompatTest.*),
#            verbosely, with what cuFile said when it refused
#   load7    llama2-7b through the CLI: page cache (warm) and tmpfs, 3
#            rounds each, cold against the raw O_DIRECT read, and one
#            `weightlift load --gds compat` (its speed is NOT GDS's)
#   slices   bench/slice_bench.py: a row and a column slice of a
#            4096 x 11008 bf16 tensor to cuda:0, weightlift vs safetensors
#            get_slice + .to("cuda") in the same run
#   firstcall7  bench/first_call.py in 3 fresh processes: the first
#            load_checkpoint(dir, device="cuda:0") end to end against the
#            pinned-copy ceiling, and later calls
#   tprows7  bench/tp_phases.py, rank 0 of 8 and of 4, the Llama plan
#            against every split on dim 0 (--plan colwise: the same bytes,
#            no row runs), two rounds: what the row-parallel parts' row
#            runs cost a rank (issue 11)
#   tpknobs7  bench/tp_phases.py, rank 0 of 8 and the whole load (n = 1),
#            defaults against one copy stream, 8 MiB slots in a 192 MiB
#            ring, and both: whether fewer, larger copies lift a rank's
#            transfer (issue 11)
#   groupone7  bench/group_one.py on llama2-7b: an NCCL group of one
#            against the plain load (automatic, 256 MiB and 64 MiB
#            batches; what a group load's own work costs)
# compare stages: REPEAT (default 3) rounds per warm/shm cell and
# COLD_REPEAT (default 2) per cold cell, round-robin, best kept and
# every run logged; COMPARE_TIMEOUT (default 560 s); MODES (default
# cold,warm,shm).
# Carry `.deps` (CLI11, liburing: `make deps-carry`) and `.whl` (`make
# peer-wheels`: fastsafetensors, runai
# streamer, instanttensor wheels) with the call.
set -u -o pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$ROOT/build-gpu
OUT=${OUT:-$ROOT/gpu-out}
mkdir -p "$OUT"
SUMMARY=$OUT/summary.txt
say() { echo "$*" | tee -a "$SUMMARY"; }
WL=$BUILD/weightlift
export PYTHONUNBUFFERED=1
. "$ROOT/bench/nccl_lib.sh"  # the NCCL group loads (tests, groupone7)

if [ -d "$ROOT/.whl" ] && ls "$ROOT"/.whl/*.whl > /dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
    --upgrade --target /tmp/site "$ROOT"/.whl/*.whl > "$OUT/pip.log" 2>&1 \
    && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONPATH=$BUILD/python${PYTHONPATH:+:$PYTHONPATH}

say "== h200_run.sh $* $(date -u +%FT%TZ) commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null)"
say "host: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB RAM;" \
    "$(nvidia-smi --query-gpu=name,memory.total,driver_version \
       --format=csv,noheader 2>&1)"
[ -e /proc/driver/nvidia-fs ] && say "nvidia-fs: loaded" || say "nvidia-fs: absent (GDS only in compatibility mode)"
say "libcufile: $(ldconfig -p 2>/dev/null | grep -m1 -o 'libcufile.so.0.*' || echo 'not in ldconfig')"

stage_build() {
  say "-- build"
  if cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
       -DWL_BUILD_PYTHON=ON -DPython_EXECUTABLE="$(command -v python3)" \
       > "$OUT/build.log" 2>&1 && ninja -C "$BUILD" -j"$(nproc)" \
       >> "$OUT/build.log" 2>&1; then
    say "build ok ($(grep -E 'io_uring support|CUDA support' "$OUT/build.log" | tr '\n' ' '))"
  else
    say "BUILD FAILED"; tail -30 "$OUT/build.log" | tee -a "$SUMMARY"; return 1
  fi
}

stage_tests() {
  say "-- GPU tests (ctest -L gpu)"
  timeout 300 ctest --test-dir "$BUILD" -L gpu --output-on-failure \
    > "$OUT/tests.log" 2>&1
  say "gpu tests: $(grep -E 'tests passed' "$OUT/tests.log" | tail -1)"
  say "-- group loads over NCCL (dist_tests)"
  timeout 120 "$BUILD/src/dist/dist_tests" --gtest_filter='Nccl*:LoadWithGroup*' \
    > "$OUT/dist_nccl.log" 2>&1
  say "dist_tests: $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/dist_nccl.log" | tr '\n' ' ')"
  say "-- Python tests on CUDA"
  timeout 300 python3 -m pytest -q -rs tests/python >> "$OUT/tests.log" 2>&1
  say "pytest: $(grep -E '(passed|failed)' "$OUT/tests.log" | tail -1)"
  local d=/dev/shm/wl_tiny
  rm -rf "$d" && "$WL" synth --layout tiny "$d" > /dev/null
  if diff <("$WL" verify --hash sha256 --device cpu "$d" 2>/dev/null) \
          <("$WL" verify --hash sha256 --device cuda:0 "$d" 2>/dev/null) \
          > /dev/null; then
    say "verify --hash: cuda:0 digests equal cpu digests"
  else
    say "verify --hash: cuda:0 and cpu DIFFER"
  fi
}

synth() {  # LAYOUT DIR
  [ -f "$2/.synth-ok" ] && return 0
  rm -rf "$2"; mkdir -p "$2"
  "$WL" synth --layout "$1" "$2" >> "$OUT/synth.log" 2>&1 && touch "$2/.synth-ok"
}

stage_bench() {  # LAYOUT
  local layout=$1 shm=/dev/shm/wl_$1 disk=/var/tmp/wl_$1
  say "-- bench $layout"
  synth "$layout" "$disk" || { say "synth $disk failed"; return 1; }
  [ -d "$shm" ] || cp -r "$disk" "$shm"
  {
    echo "### $layout from disk (cold: caches dropped before every step)"
    echo '$ sync; echo 3 > /proc/sys/vm/drop_caches; weightlift bench --device cuda:0'
    sync; echo 3 > /proc/sys/vm/drop_caches
    "$WL" bench "$disk" --device cuda:0 --repeat 1 --mode cold
    echo "### $layout from the page cache (warm)"
    "$WL" bench "$disk" --device cuda:0 --repeat 3 --mode warm
    echo "### $layout from tmpfs (RAM-backed)"
    "$WL" bench "$shm" --device cuda:0 --repeat 3 --mode warm
    echo "### $layout load reports (defaults)"
    "$WL" load "$shm" --device cuda:0
    sync; echo 3 > /proc/sys/vm/drop_caches
    "$WL" load "$disk" --device cuda:0 --cold
  } > "$OUT/bench_$layout.log" 2>&1
  grep -E "weightlift loader|ceiling|loader /|naive" "$OUT/bench_$layout.log" \
    | head -24 >> "$SUMMARY"
}

stage_cold() {  # LAYOUT: cold from disk only, against the best raw read
  local disk=/var/tmp/wl_$1
  say "-- cold $1"
  synth "$1" "$disk" || { say "synth $disk failed"; return 1; }
  sync; echo 3 > /proc/sys/vm/drop_caches
  "$WL" bench "$disk" --device cuda:0 --repeat 2 --mode cold \
    > "$OUT/cold_$1.log" 2>&1
  grep -E "weightlift loader|ceiling|loader /|naive|RSS" "$OUT/cold_$1.log" \
    >> "$SUMMARY"
}

stage_compare() {  # LAYOUT [E2E]
  say "-- compare $1"
  rm -rf "/dev/shm/wl_$1"  # compare.py makes its own tmpfs copy
  synth "$1" "/var/tmp/wl_$1" || { say "synth failed"; return 1; }
  timeout "${COMPARE_TIMEOUT:-560}" python3 bench/compare.py --device cuda:0 --layouts "$1" \
    --dir "$1=/var/tmp/wl_$1" --cli "$WL" --repeat "${REPEAT:-3}" --cold-repeat "${COLD_REPEAT:-2}" --e2e "${2:-none}" \
    --modes "${MODES:-cold,warm,shm}" \
    --md "$OUT/compare_$1.md" --png "$OUT/compare_$1.png" \
    --json "$OUT/compare_$1.json" > "$OUT/compare_$1.log" 2>&1
  say "compare exit $?"; tail -20 "$OUT/compare_$1.md" >> "$SUMMARY" 2>/dev/null
}

stage_coldpaths() {  # LAYOUT: cold load per read backend, interleaved twice
  local disk=/var/tmp/wl_$1
  say "-- cold paths $1"
  synth "$1" "$disk" || { say "synth $disk failed"; return 1; }
  for round in 1 2; do
    for b in uring pread direct; do
      sync; echo 3 > /proc/sys/vm/drop_caches
      echo "### round $round backend $b" >> "$OUT/coldpaths_$1.log"
      "$WL" load "$disk" --device cuda:0 --cold --backend "$b" \
        >> "$OUT/coldpaths_$1.log" 2>&1
      say "round $round $b: $(grep '^device' "$OUT/coldpaths_$1.log" | tail -1)"
    done
  done
}

stage_host() {  # LAYOUT: host loads, warm, against the warm references
  local disk=/var/tmp/wl_$1
  say "-- host $1"
  synth "$1" "$disk" || { say "synth $disk failed"; return 1; }
  /usr/bin/time -v "$WL" bench "$disk" --device cpu --repeat 2 --mode warm \
    > "$OUT/host_$1.log" 2>&1
  grep -E "weightlift|ceiling|sequential|loader /|LoadInto /|naive|RSS|Maximum resident" \
    "$OUT/host_$1.log" >> "$SUMMARY"
}

stage_first() {  # LAYOUT: first calls in fresh processes, warm page cache
  say "-- first calls $1"
  synth "$1" "/var/tmp/wl_$1" || { say "synth failed"; return 1; }
  timeout "${COMPARE_TIMEOUT:-560}" python3 bench/compare.py --device cuda:0 \
    --layouts "$1" --dir "$1=/var/tmp/wl_$1" --cli "$WL" --modes first \
    --repeat "${REPEAT:-3}" --budget "${FIRST_BUDGET:-0}" --e2e none --md "$OUT/first_$1.md" \
    --png "$OUT/first_$1.png" --json "$OUT/first_$1.json" \
    > "$OUT/first_$1.log" 2>&1
  say "first exit $?"; grep -E "^\| |ceiling" "$OUT/first_$1.md" >> "$SUMMARY"
}

stage_ttft() {  # LAYOUT: time to the first token, split
  say "-- ttft $1"
  synth "$1" "/var/tmp/wl_$1" || { say "synth failed"; return 1; }
  timeout 560 python3 bench/e2e_ttft.py --layout "$1" --device cuda:0 \
    --dir "/var/tmp/wl_$1" --runs "${REPEAT:-2}" --md "$OUT/ttft_$1.md" \
    --json "$OUT/ttft_$1.json" > "$OUT/ttft_$1.log" 2>&1
  say "ttft exit $?"; grep -E "^\| " "$OUT/ttft_$1.md" >> "$SUMMARY"
}

stage_vllm() {  # LAYOUT
  local disk=/var/tmp/wl_$1 log=$OUT/vllm_$1.log
  say "-- vLLM plugin load path $1 (bench/vllm_plugin.py)"
  synth "$1" "$disk" || { say "synth $disk failed"; return 1; }
  local run
  for run in "--mode warm --runs 3" "--mode warm --runs 3 --tp-size 4 --tp-rank 1" \
             "--mode cold --runs 2"; do
    echo "\$ python3 bench/vllm_plugin.py $disk --device cuda:0 $run" >> "$log"
    [ "${run#--mode cold}" != "$run" ] && { sync; echo 3 > /proc/sys/vm/drop_caches; }
    timeout 200 python3 "$ROOT/bench/vllm_plugin.py" "$disk" --device cuda:0 \
      $run >> "$log" 2>&1 || say "vllm_plugin.py $run failed (rc $?)"
    say "$run: $(grep -E '^best|ceiling' "$log" | tail -3 | tr '\n' ' ')"
  done
}

stage_gdscompat() {
  say "-- GDS compat + slices to cuda:0 (gpu_tests, verbose)"
  timeout 200 "$BUILD/tests/gpu/gpu_tests" \
    --gtest_filter='GdsCompatTest.*:SpineTest.*' > "$OUT/gds_compat.log" 2>&1
  say "gds compat + slices: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$OUT/gds_compat.log" | tr '\n' ' ')"
  grep -E "cannot run here|SKIPPED|Failure" -A2 "$OUT/gds_compat.log" | head -20 | tee -a "$SUMMARY"
}

stage_load() {  # LAYOUT: the CLI warm, from tmpfs, cold, and GDS compat
  local disk=/var/tmp/wl_$1 shm=/dev/shm/wl_$1 log=$OUT/load_$1.log
  say "-- load $1 (CLI)"
  synth "$1" "$disk" || { say "synth $disk failed"; return 1; }
  [ -d "$shm" ] || cp -r "$disk" "$shm"
  {
    cat "$disk"/*.safetensors > /dev/null   # page cache
    for i in 1 2 3; do "$WL" load "$disk" --device cuda:0; done
    for i in 1 2 3; do "$WL" load "$shm" --device cuda:0; done
    sync; echo 3 > /proc/sys/vm/drop_caches
    "$WL" bench "$disk" --device cuda:0 --repeat 1 --mode cold
    cat "$disk"/*.safetensors > /dev/null
    "$WL" load "$disk" --device cuda:0 --gds compat
  } > "$log" 2>&1
  say "page cache then tmpfs (GB/s per round):" \
      "$(grep -E '^device cuda' "$log" | head -6 | grep -oE '\([0-9.]+ GB/s\)' | tr '\n' ' ')"
  grep -E "weightlift loader|ceiling|loader /|raw" "$log" | head -12 >> "$SUMMARY"
  say "gds compat load (NOT a GDS speed): $(grep -E '^device cuda' "$log" | tail -1)"
}

stage_slices() {
  say "-- slices (4096 x 11008 bf16 to cuda:0)"
  timeout 300 python3 "$ROOT/bench/slice_bench.py" --device cuda:0 \
    --repeat 7 > "$OUT/slices.log" 2>&1
  grep -E "slice|report" "$OUT/slices.log" >> "$SUMMARY"
}

stage_firstcall() {  # LAYOUT: bench/first_call.py in 3 fresh processes
  local disk=/var/tmp/wl_$1
  say "-- firstcall $1 (fresh processes, load_checkpoint to cuda:0)"
  synth "$1" "$disk" || { say "synth $disk failed"; return 1; }
  cat "$disk"/*.safetensors > /dev/null
  for i in 1 2 3; do
    timeout 120 python3 "$ROOT/bench/first_call.py" "$disk" \
      --device cuda:0 --calls 3
  done > "$OUT/firstcall_$1.log" 2>&1
  grep -E "ceiling|^call" "$OUT/firstcall_$1.log" >> "$SUMMARY"
}

stage_tprows() {  # LAYOUT: what a rank's row runs cost (issue 11)
  local disk=/var/tmp/wl_$1
  say "-- tprows $1 (tp_phases.py: rank 0, the Llama plan against all colwise)"
  synth "$1" "$disk" || { say "synth $disk failed"; return 1; }
  cat "$disk"/*.safetensors > /dev/null
  for round in 1 2; do
    for n in 8 4; do
      for plan in llama colwise; do
        timeout 60 python3 "$ROOT/bench/tp_phases.py" --ckpt "$disk" --n $n \
          --calls 4 --plan $plan --device cuda:0
      done
    done
  done > "$OUT/tprows_$1.log" 2>&1
  grep -E " call [0-9]" "$OUT/tprows_$1.log" | sed -E 's/; take_tp.*seconds/ | seconds/' \
    >> "$SUMMARY"
}

stage_tpknobs() {  # LAYOUT: fewer, larger copies for a rank of 8 (issue 11)
  local disk=/var/tmp/wl_$1
  say "-- tpknobs $1 (tp_phases.py: rank 0 of 8 and the whole load, staging knobs)"
  synth "$1" "$disk" || { say "synth $disk failed"; return 1; }
  cat "$disk"/*.safetensors > /dev/null
  # Why: a rank of 8 moves 1.9 GB in about 530 copies (3.6 MB on average)
  # and its transfer runs at 0.86-0.90x of the ceiling against 0.93x for
  # the whole load's 4.2 MB; a fixed cost of about 7 us per copy fits both
  # and the 3 MiB / 4 MiB slot sweep of session 11. One copy stream saved
  # a little there too (0.916-0.920x against 0.910-0.915x).
  local opts
  for round in 1 2; do
    for n in 8 1; do
      for opts in "" "--option copy_streams=1" \
                  "--option cuda_chunk=8M --option staging=192M" \
                  "--option cuda_chunk=8M --option staging=192M --option copy_streams=1"; do
        # shellcheck disable=SC2086
        timeout 60 python3 "$ROOT/bench/tp_phases.py" --ckpt "$disk" --n $n \
          --calls 4 --device cuda:0 $opts
      done
    done
  done > "$OUT/tpknobs_$1.log" 2>&1
  grep -E " call [0-9]" "$OUT/tpknobs_$1.log" | sed -E 's/; take_tp.*seconds/ | seconds/' \
    >> "$SUMMARY"
}

stage_groupone() {  # LAYOUT: a group of one over NCCL against the plain load
  local disk=/var/tmp/wl_$1
  say "-- groupone $1 (bench/group_one.py: NCCL group of one vs plain)"
  synth "$1" "$disk" || { say "synth $disk failed"; return 1; }
  cat "$disk"/*.safetensors > /dev/null
  timeout 120 python3 "$ROOT/bench/group_one.py" --ckpt "$disk" \
    --device cuda:0 --rounds 3 > "$OUT/groupone_$1.log" 2>&1
  grep -E "x the plain load" "$OUT/groupone_$1.log" >> "$SUMMARY"
}

for s in "$@"; do
  case "$s" in
    build) stage_build || break ;;
    tests) stage_tests ;;
    bench7) stage_bench llama2-7b ;;
    bench13) stage_bench llama2-13b ;;
    compare7) stage_compare llama2-7b ;;
    compare13) stage_compare llama2-13b ;;
    e2e) stage_compare llama2-7b auto ;;
    cold7) stage_cold llama2-7b ;;
    coldpaths7) stage_coldpaths llama2-7b ;;
    host7) stage_host llama2-7b ;;
    first7) stage_first llama2-7b ;;
    ttft7) stage_ttft llama2-7b ;;
    vllm7) stage_vllm llama2-7b ;;
    gdscompat) stage_gdscompat ;;
    load7) stage_load llama2-7b ;;
    slices) stage_slices ;;
    firstcall7) stage_firstcall llama2-7b ;;
    tprows7) stage_tprows llama2-7b ;;
    groupone7) stage_groupone llama2-7b ;;
    tpknobs7) stage_tpknobs llama2-7b ;;
    *) say "unknown stage $s" ;;
  esac
done
say "== done $(date -u +%FT%TZ)"
