# Sourced by the device scripts (bench/results/*/probes/gpu_*.sh) before
# their work: a time guard, logging, packing and the machine's quirks, so
# each script is only its measurements.
#
#   TAG=s9a DEADLINE=540 . bench/device_preamble.sh
#
# Logs go to /tmp/o$TAG and come back packed as $OUT/$TAG.tgz (pack after
# each step, so a call cut short still returns what it measured). Provides:
#   el            seconds since the script started
#   fits N        whether N more seconds still end before DEADLINE
#   log MSG       "[el s] MSG" to the terminal and $OUT/summary.txt
#   pack          refresh the archive
#   build_tree SRC BUILD NAME   Release build of the CLI and the Python
#                 module (CLI11 and liburing from the carried .deps)
#   synth_cached BUILD DIR   the Llama-2-7B synthetic checkpoint in DIR
#                 (written once per machine by BUILD's CLI), read into the
#                 page cache; run it in the background and wait for it
#   gpu_tests BUILD SECONDS [GTEST_FLAGS...]   BUILD's GPU test binary,
#                 logged to gpu_tests.log and summed up in the summary
#   gpu_pytest BUILD NAME SECONDS PYTEST_ARGS...   the Python tests with
#                 BUILD's module (those that need a GPU run here only),
#                 logged to NAME.log; the outcome and failures in the summary
#   tp_round NAME SECONDS BUILD DIR [TP_BENCH_ARGS...]   one tp_bench.py
#                 --prepared --spawn run on cuda:0, its JSON and log as NAME
#   tp_setup BUILD DIR   what a tp_round needs first: this tree built in
#                 BUILD, the GPU's name in gpu.txt, the checkpoint in DIR
#                 (synth_cached) and the package byte-compiled
T0=$(date +%s)
DEADLINE=${DEADLINE:-540}
RET=$OUT
export OUT=/tmp/o$TAG
rm -rf "$OUT"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
ROOT=$PWD
PACK="$RET/$TAG.tgz"
pack() { tar czf "$PACK" -C "$OUT" .; }
el() { echo $(($(date +%s) - T0)); }
fits() { [ $(($(el) + $1)) -le "$DEADLINE" ]; }
log() { echo "[$(el) s] $*" | tee -a "$OUT/summary.txt"; }
build_tree() {
  cmake -S "$1" -B "$2" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DWL_BUILD_PYTHON=ON -DPython_EXECUTABLE="$(command -v python3)" \
    -DCMAKE_PREFIX_PATH="$ROOT/.deps" > "$OUT/build_$3.log" 2>&1 &&
    ninja -C "$2" -j6 weightlift_cli weightlift_python >> "$OUT/build_$3.log" 2>&1
  echo "build $3 rc $?" >> "$OUT/summary.txt"
}
synth_cached() {
  mkdir -p "$2"
  [ -f "$2/model.safetensors.index.json" ] ||
    "$1/weightlift" synth --layout llama2-7b --shards 2 "$2" > "$OUT/synth.log" 2>&1
  cat "$2"/*.safetensors > /dev/null
}
gpu_tests() {
  local build=$1 secs=$2
  shift 2
  fits "$secs" || return
  timeout "$secs" "$build/tests/gpu/gpu_tests" "$@" > "$OUT/gpu_tests.log" 2>&1
  log "gpu_tests rc $? $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/gpu_tests.log" | tr '\n' ' ')"
  pack
}
gpu_pytest() {
  local build=$1 name=$2 secs=$3
  shift 3
  fits "$secs" || return
  PYTHONPATH=$build/python timeout "$secs" python3 -m pytest -q -p no:cacheprovider -rs "$@" > "$OUT/$name.log" 2>&1
  log "$name rc $? $(tail -1 "$OUT/$name.log")"
  grep -E "^FAILED|^ERROR|^E " "$OUT/$name.log" | head -20 >> "$OUT/summary.txt"
  pack
}
tp_round() {
  local name=$1 secs=$2 build=$3 dir=$4
  shift 4
  fits "$secs" || return
  PYTHONPATH=$build/python timeout "$secs" python3 bench/tp_bench.py --ckpt "$dir" \
    --device cuda:0 --prepared --spawn --json "$OUT/$name.json" "$@" > "$OUT/$name.log" 2>&1
  log "$name rc $?"
  grep -E "^n=|ceiling" "$OUT/$name.log" | sed "s/^/$name: /" >> "$OUT/summary.txt"
  pack
}
tp_setup() {
  build_tree . "$1" main
  nvidia-smi --query-gpu=name,driver_version --format=csv > "$OUT/gpu.txt" 2>&1
  synth_cached "$1" "$2"
  python3 -m compileall -q "$1/python/weightlift" > /dev/null 2>&1
  log "synth + page cache done"
}
cat .probe/commit.txt > "$OUT/commit.txt" 2>/dev/null
# The machine has no udev database; libcufile and the page-cache probe read
# the block devices' properties from it.
mkdir -p /run/udev/data
touch /run/udev/control
for d in $(lsblk -dno MAJ:MIN 2>/dev/null) 254:0; do
  printf 'E:ID_FS_USAGE=filesystem\nE:ID_FS_TYPE=ext4\nE:DEVTYPE=disk\n' > "/run/udev/data/b$d"
done
