#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz_header, fuzz_index) with clang in a
# separate build directory and runs each for SECONDS (default 60).
#
#   fuzz/run.sh [SECONDS]
#
# Environment: WL_WERROR (ON: warnings are errors; default OFF),
# WL_FUZZ_BUILD_DIR (default <repo>/build-fuzz), WL_FUZZ_JOBS
# (parallel compile jobs, default 2), WL_FUZZ_SOURCE_DIR (the CMake source
# dir, default the repo root; it must add_subdirectory(fuzz) under
# WL_BUILD_FUZZERS). Crashes are written to the build dir's crashes/ folder;
# the script exits non-zero when a fuzzer fails.
set -euo pipefail

secs="${1:-60}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${WL_FUZZ_BUILD_DIR:-$root/build-fuzz}"
src="${WL_FUZZ_SOURCE_DIR:-$root}"
jobs="${WL_FUZZ_JOBS:-2}"

mkdir -p "$build"
cmake -S "$src" -B "$build" -G Ninja \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWL_WERROR="${WL_WERROR:-OFF}" \
  -DWL_BUILD_FUZZERS=ON -DWL_BUILD_TESTS=OFF -DWL_BUILD_TOOLS=OFF \
  -DWL_BUILD_BENCH=OFF -DWL_BUILD_PYTHON=OFF -DWL_CUDA=OFF -DWL_URING=OFF \
  >"$build/configure.log" 2>&1 || { cat "$build/configure.log"; exit 1; }
ninja -C "$build" -j "$jobs" fuzz_header fuzz_index

# --- seed corpus (small, generated: no binary files in git) ---------------
corpus="$build/corpus"
rm -rf "$corpus/header.seed" "$corpus/index.seed"
mkdir -p "$corpus/header" "$corpus/index" "$corpus/header.seed" \
  "$corpus/index.seed" "$build/crashes"

# u64le N: the 8-byte little-endian length prefix.
u64le() {
  local n=$1 i
  for i in 0 1 2 3 4 5 6 7; do
    printf "\\$(printf '%03o' $(((n >> (8 * i)) & 255)))"
  done
}
# image NAME JSON DATA_BYTES: a whole safetensors file.
image() {
  { u64le "${#2}"; printf '%s' "$2"; head -c "$3" /dev/zero; } \
    >"$corpus/header.seed/$1"
}
e='"dtype":"F32","shape":[2],"data_offsets":[0,8]'
image empty '{}' 0
image one "{\"a\":{$e}}" 8
image padded "{\"a\":{$e}}      " 8
image meta "{\"__metadata__\":{\"format\":\"pt\"},\"a\":{$e}}" 8
image two '{"b":{"dtype":"BF16","shape":[2,1],"data_offsets":[4,8]},"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}}' 8
image subbyte '{"f4":{"dtype":"F4","shape":[2],"data_offsets":[0,1]},"f6":{"dtype":"F6_E2M3","shape":[4],"data_offsets":[1,4]}}' 4
image scalar '{"s":{"dtype":"F64","shape":[],"data_offsets":[0,8]},"e":{"dtype":"I8","shape":[0],"data_offsets":[8,8]}}' 8
printf '%s' '{"e":{"dtype":"F16","shape":[3,0],"data_offsets":[0,0]}}' \
  >"$corpus/header.seed/bare_json"
printf '%s' '{"metadata":{"total_size":12},"weight_map":{"a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors"}}' \
  >"$corpus/index.seed/index"
printf '%s' '{"weight_map":{"x":"sub/a.safetensors"}}' >"$corpus/index.seed/sub"

status=0
for name in header index; do
  echo "== fuzz_$name for ${secs}s"
  if ! "$build/fuzz/fuzz_$name" "$corpus/$name" "$corpus/$name.seed" \
      -dict="$root/fuzz/json.dict" -max_total_time="$secs" \
      -max_len=65536 -rss_limit_mb=4096 -print_final_stats=1 \
      -artifact_prefix="$build/crashes/$name-" 2>"$build/fuzz_$name.log"; then
    status=1
    echo "fuzz_$name FAILED; see $build/fuzz_$name.log and $build/crashes/"
    tail -n 40 "$build/fuzz_$name.log"
  else
    grep -E 'stat::number_of_executed_units|stat::peak_rss_mb' \
      "$build/fuzz_$name.log" || true
  fi
done
exit $status
