# session 10, call B (~5 min): s10 only. Where a first call's time goes
# beyond the report's phases (first_call_timeline.py, whole checkpoint and
# TP n=2 rank 0, fresh processes); more first calls on today's machine;
# tp_bench together n=2,4,8.
TAG=s10b; DEADLINE=${DEADLINE:-420}
. bench/device_preamble.sh
build_tree . build-new new
D=/var/tmp/wl_llama2-7b
mkdir -p $D; [ -f $D/model.safetensors.index.json ] || build-new/weightlift synth --layout llama2-7b --shards 2 $D > $OUT/synth.log 2>&1; cat $D/*.safetensors > /dev/null
log "build + synth done"; pack
python3 -m compileall -q build-new/python/weightlift > /dev/null 2>&1
P=bench/results/2026-12-04-h200-session10/probes/first_call_timeline.py
for r in 1 2; do
  fits 30 && { PYTHONPATH=build-new/python timeout 25 python3 $P $D 2 > $OUT/timeline_full_$r.log 2>&1; log "timeline full $r rc $? $(head -1 $OUT/timeline_full_$r.log)"; }
  fits 30 && { PYTHONPATH=build-new/python timeout 25 python3 $P $D 2 2 > $OUT/timeline_tp2_$r.log 2>&1; log "timeline tp2 $r rc $? $(head -1 $OUT/timeline_tp2_$r.log)"; }
done; pack
for r in 1 2 3; do
  fits 40 && { PYTHONPATH=build-new/python timeout 25 python3 bench/first_call.py $D --later free,keep > $OUT/first_new_$r.log 2>&1; log "first new $r rc $? $(grep -m1 'call 1' $OUT/first_new_$r.log | cut -c1-100)"; }
done; pack
fits 90 && { PYTHONPATH=build-new/python timeout 120 python3 bench/tp_bench.py --ckpt $D --sizes 2,4,8 --modes alone,together --no-verify --device cuda:0 > $OUT/tp_bench_new.log 2>&1; log "tp_bench rc $?"; grep -E "^n=" $OUT/tp_bench_new.log | sed 's/(goal.*//' >> $OUT/summary.txt; pack; }
log end; pack
cat $OUT/summary.txt
