#!/usr/bin/env bash
# Tensor-parallel slice mode on one H200 (issue 11): n = 2, 4, 8 processes
# share cuda:0, each loading its parts of a Llama-2-7B-layout checkpoint in
# the page cache (no NCCL); each rank alone, all at once, and the peers
# (safetensors get_slice + .to, full load + narrow), with the pinned-copy
# ceiling measured in the same run. Logs and JSON go to $OUT.
#
#   bash bench/h200_tp.sh            # build (if needed) + synth + bench
#   SIZES=2,4 bash bench/h200_tp.sh  # fewer rank counts
#
# Goals (docs/tensor-parallel.md): each rank alone >= 45 GB/s delivered;
# all at once >= 0.9x the pinned-copy ceiling; every rank bit-exact.
set -u -o pipefail
set -x
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$ROOT/build-gpu
OUT=${OUT:-$ROOT/gpu-out}
SIZES=${SIZES:-2,4,8}
CKPT=${CKPT:-/tmp/wl_tp_llama2-7b}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
export PYTHONPATH=$BUILD/python${PYTHONPATH:+:$PYTHONPATH}

if ! ls "$BUILD"/python/weightlift/_native*.so > /dev/null 2>&1; then
  bash "$ROOT/bench/h200_run.sh" build || exit 1
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv \
  > "$OUT/tp_gpu.txt" 2>&1
if [ ! -f "$CKPT/model.safetensors.index.json" ]; then
  "$BUILD/weightlift" synth --layout llama2-7b --shards 2 "$CKPT" \
    > "$OUT/tp_synth.log" 2>&1 || { tail "$OUT/tp_synth.log"; exit 1; }
fi
cat "$CKPT"/*.safetensors > /dev/null   # into the page cache
python3 "$ROOT/bench/tp_bench.py" --ckpt "$CKPT" --sizes "$SIZES" \
  --device cuda:0 --json "$OUT/tp_bench.json" 2>&1 | tee "$OUT/tp_bench.log"
rc=${PIPESTATUS[0]}
echo "tp_bench exit $rc" | tee -a "$OUT/tp_bench.log"

# The NCCL paths one GPU can run: NcclCommunicator joins (non-blocking
# init, polled) as 1 of 1 and moves bytes, and gives up at its 3 s timeout
# as rank 0 of 2 when rank 1 never comes; group mode over torch's NCCL
# group through the C++ load (one rank on cuda:0), bit-exact. libnccl
# comes from torch's wheel when the system has none.
. "$(dirname "$0")/nccl_lib.sh"
"$BUILD/src/dist/dist_tests" --gtest_filter='Nccl*:LoadWithGroup*' \
  2>&1 | tee "$OUT/tp_nccl_unit.log"
nccl_unit=${PIPESTATUS[0]}
# The command line's group mode as a group of one (NCCL id file, join,
# LoadWithGroup): every byte read by this rank.
"$BUILD/weightlift" load "$CKPT" --device cuda:0 --group nccl \
  --group-rank 0 --group-size 1 --nccl-id "$OUT/cli_group.id" --json \
  > "$OUT/tp_cli_group.json" 2> "$OUT/tp_cli_group.err" || nccl_unit=1
[ -e "$OUT/cli_group.id" ] && { echo "cli group: id file left"; nccl_unit=1; }
python3 -m pytest -q -rs -p no:cacheprovider "$ROOT/tests/python/test_tp.py" \
  -k nccl 2>&1 | tee "$OUT/tp_nccl_python.log"
nccl_py=${PIPESTATUS[0]}
echo "nccl unit exit $nccl_unit, python exit $nccl_py" | tee -a "$OUT/tp_bench.log"
[ "$rc" -eq 0 ] && [ "$nccl_unit" -eq 0 ] && [ "$nccl_py" -eq 0 ]
