# session 12, call D (~7 min): CLDEMOTE / CLWB / CLFLUSHOPT over a staging
# slot's bytes after its read (branch s12-probe, WL_PROBE_FLUSH). Later calls
# of 4 configurations interleaved (flush_sweep.py, each checked against the
# default's tensors; two processes); first calls, interleaved fresh
# processes, default against demote and clwb; TP ranks alone with demote.
TAG=s12d; DEADLINE=${DEADLINE:-570}
. bench/device_preamble.sh
(lscpu; uptime; top -bn1 | head -15) > $OUT/machine.txt 2>&1
build_tree . build-main main
D=/var/tmp/wl_llama2-7b
mkdir -p $D; [ -f $D/model.safetensors.index.json ] || build-main/weightlift synth --layout llama2-7b --shards 2 $D > $OUT/synth.log 2>&1; cat $D/*.safetensors > /dev/null
wait
log "build + synth done"; pack
python3 -m compileall -q build-main/python/weightlift > /dev/null 2>&1
P=bench/results/2026-12-04-h200-session12/probes
for i in 1 2; do
  fits 100 && { PYTHONPATH=build-main/python timeout 100 python3 $P/flush_sweep.py $D 4 > $OUT/sweep_$i.log 2>&1; log "sweep $i rc $?"; cat $OUT/sweep_$i.log >> $OUT/summary.txt; pack; }
done
for r in 1 2 3; do
  for s in d demote clwb; do
    o=""; g=""; [ $s != d ] && g=$s
    fits 25 && { WL_PROBE_FLUSH=$g PYTHONPATH=build-main/python timeout 25 python3 bench/first_call.py $D --later free,keep $o > $OUT/first_${s}_$r.log 2>&1; log "first $s $r rc $? $(grep -m1 'call 1' $OUT/first_${s}_$r.log | cut -c1-110)"; }
  done; pack
done
for s in d demote; do
  g=""; [ $s != d ] && g=$s
  fits 40 && { WL_PROBE_FLUSH=$g PYTHONPATH=build-main/python timeout 40 python3 bench/tp_bench.py --ckpt $D --sizes 4,8 --modes alone --no-verify --device cuda:0 > $OUT/tp_alone_$s.log 2>&1; log "tp alone $s rc $?"; grep -E "^n=" $OUT/tp_alone_$s.log | sed 's/(goal.*//' >> $OUT/summary.txt; pack; }
done
log end; pack
cat $OUT/summary.txt
