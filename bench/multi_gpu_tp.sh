#!/usr/bin/env bash
# Issue 15: group mode over NCCL and slice mode on every GPU of the machine
# (kinds nvidia-h200-x2 / -x4 / -x8), Llama-2-7B and Llama-2-13B layouts,
# from the page cache, tmpfs and cold; every rank bit-exact against
# safetensors on its own GPU + tensor_split; no CUDA context on another GPU
# (nvidia-smi --query-compute-apps). Logs and JSON go to $OUT.
#
#   bash bench/multi_gpu_tp.sh                 # every GPU, 7b and 13b
#   LAYOUTS=llama2-7b FROM=warm bash bench/multi_gpu_tp.sh
#
# Leave NVLink multicast off (NCCL_NVLS_ENABLE=0 below; see the device
# README). Peers (InstantTensor, fastsafetensors with a process group) are
# not wired into this script yet.
set -u -o pipefail
set -x
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$ROOT/build-gpu
OUT=${OUT:-$ROOT/gpu-out}
LAYOUTS=${LAYOUTS:-llama2-7b llama2-13b}
FROM=${FROM:-warm shm cold}
NGPU=${NGPU:-$(nvidia-smi -L | wc -l)}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
export PYTHONPATH=$BUILD/python${PYTHONPATH:+:$PYTHONPATH}
# libnccl for the command line's group mode: torch's wheel when the system
# has none.
. "$(dirname "$0")/nccl_lib.sh"
SUMMARY=$OUT/multi_gpu_tp.txt

if ! ls "$BUILD"/python/weightlift/_native*.so > /dev/null 2>&1; then
  bash "$ROOT/bench/h200_run.sh" build || exit 1
fi
{ nvidia-smi -L; nvidia-smi topo -m; } > "$OUT/topology.txt" 2>&1
echo "== multi_gpu_tp.sh $(date -u +%FT%TZ): $NGPU GPUs" | tee -a "$SUMMARY"

# Host memory bandwidth (one core's memcpy and 16 threads' reads), stated
# beside the aggregate: the node rate stops scaling where it binds.
python3 - <<'PY' 2>&1 | tee -a "$SUMMARY"
import time, torch
a = torch.empty(2 << 30, dtype=torch.uint8); a.fill_(1)
b = torch.empty_like(a)
torch.set_num_threads(16)
best = 0
for _ in range(3):
    t0 = time.perf_counter(); b.copy_(a); dt = time.perf_counter() - t0
    best = max(best, a.numel() / dt / 1e9)
print(f"host memcpy (torch copy_, 16 threads, 2 GiB): {best:.1f} GB/s")
PY

rc=0
for layout in $LAYOUTS; do
  disk=/tmp/wl_tp_$layout
  if [ ! -f "$disk/model.safetensors.index.json" ]; then
    "$BUILD/weightlift" synth --layout "$layout" --shards 2 "$disk" \
      > "$OUT/synth_$layout.log" 2>&1 || { rc=1; continue; }
  fi
  for from in $FROM; do
    ckpt=$disk
    case $from in
      shm)  ckpt=/dev/shm/wl_tp_$layout; rm -rf "$ckpt"; cp -r "$disk" "$ckpt" ;;
      warm) cat "$disk"/*.safetensors > /dev/null ;;
      cold) sync; echo 3 > /proc/sys/vm/drop_caches || \
              "$BUILD/weightlift" load "$disk" --cold --device cpu > /dev/null ;;
    esac
    if [ "$from" = cold ]; then  # the disk's raw rate, stated beside it
      sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null
      dd if="$disk/$(ls "$disk" | grep safetensors$ | head -1)" of=/dev/null \
        bs=8M iflag=direct 2>&1 | tail -1 | sed "s/^/[$layout cold] disk raw O_DIRECT 1 thread: /" \
        | tee -a "$SUMMARY"
      sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null
    fi
    timeout 900 torchrun --standalone --nproc-per-node "$NGPU" \
      "$ROOT/bench/tp_multi_gpu.py" --ckpt "$ckpt" --label "$layout $from" \
      --verify $([ "$from" = cold ] && echo 0 || echo 1) \
      --json "$OUT/tp_${layout}_${from}.json" \
      > "$OUT/tp_${layout}_${from}.log" 2>&1 || rc=1
    grep '^\[' "$OUT/tp_${layout}_${from}.log" | tee -a "$SUMMARY"
    if [ "$from" = warm ]; then  # the C++ group path, no Python: the CLI
      for tp in "" "--tp-plan $ROOT/bench/llama_plan.json"; do
        tag=$([ -z "$tp" ] && echo full || echo tp)
        timeout 600 torchrun --standalone --nproc-per-node "$NGPU" \
          --no-python "$ROOT/bench/cli_group_rank.sh" "$BUILD/weightlift" \
          "$ckpt" "$OUT/cli_${layout}_${tag}.id" "$OUT/cli_${layout}_${tag}" \
          $tp > "$OUT/cli_${layout}_${tag}.log" 2>&1 || rc=1
        python3 - "$OUT" "$layout" "$tag" <<'PY' | tee -a "$SUMMARY"
import glob, json, sys
out, layout, tag = sys.argv[1:]
rs = [json.load(open(p)) for p in
      sorted(glob.glob(f"{out}/cli_{layout}_{tag}_rank*.json"))]
if rs:
    read = sum(r["bytes_read"] for r in rs)
    print(f"[{layout} cli group {tag}] {len(rs)} ranks: slowest "
          f"{max(r['seconds'] for r in rs):.3f} s; per rank GB/s delivered "
          + ", ".join(f"{r['gb_per_s']:.1f}" for r in rs)
          + f"; read {read / 1e9:.2f} GB in all")
PY
      done
    fi
    [ "$from" = shm ] && rm -rf "$ckpt"
  done
done
echo "multi_gpu_tp.sh exit $rc" | tee -a "$SUMMARY"
exit $rc
