# session 6 call A: main sweep of staging knobs, fresh processes; CLI vs Python
RET=$OUT; export OUT=/tmp/oa; rm -rf $OUT; mkdir -p $OUT
export PYTHONUNBUFFERED=1
pack() { tar czf $RET/a.tgz -C $OUT . ; }
git log --oneline -1 > $OUT/commit.txt 2>/dev/null; cat .probe/commit.txt >> $OUT/commit.txt 2>/dev/null
timeout 120 bash bench/h200_run.sh build; pack
WL=build-gpu/weightlift; D=/var/tmp/wl_llama2-7b
if [ ! -f $D/.synth-ok ]; then rm -rf $D; mkdir -p $D; ( time $WL synth --layout llama2-7b $D ) > $OUT/synth.log 2>&1 && touch $D/.synth-ok; fi
cat $D/*.safetensors > /dev/null
export PYTHONPATH=build-gpu/python
python3 - > $OUT/ceiling.log 2>&1 <<'PY'
import torch, time
h = torch.empty(2<<30, dtype=torch.uint8, pin_memory=True); h.fill_(1)
g = torch.empty(2<<30, dtype=torch.uint8, device="cuda:0")
for i in range(4):
    torch.cuda.synchronize(); t=time.perf_counter(); g.copy_(h, non_blocking=True); torch.cuda.synchronize()
    print(f"pinned ceiling {h.numel()/(time.perf_counter()-t)/1e9:.2f} GB/s")
PY
pack
S=$OUT/sweep.log
CONFIGS=("" "chunk=2M staging=64M" "chunk=3M staging=96M" "chunk=3M staging=144M" "chunk=2M staging=96M" "threads=12 chunk=4M staging=96M" "threads=14 chunk=4M staging=112M" "copy_streams=1" "copy_streams=2" "copy_streams=4" "chunk=6M staging=192M" "chunk=1M staging=64M")
for rep in 1 2; do
  for c in "${CONFIGS[@]}"; do
    timeout 40 python3 .probe/sweep6.py $D $c >> $S 2>&1
  done
  pack
done
# CLI: default and two alternatives, fresh processes
for rep in 1 2; do
  for c in "" "--chunk 2M --staging 64M" "--chunk 3M --staging 96M"; do
    echo "== CLI load $c" >> $OUT/cli.log
    timeout 30 $WL load $D --device cuda:0 $c 2>&1 | grep -E "^device|phases|setup" >> $OUT/cli.log
  done
done
timeout 60 $WL bench $D --device cuda:0 --repeat 3 --mode warm > $OUT/cli_bench_warm.log 2>&1
pack
grep -E "first:" $S | sort | head -40 > $OUT/first_sorted.txt; pack
