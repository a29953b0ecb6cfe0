# session 11, call G (~5 min): do the copies want fewer streams or a smaller
# ring? Later calls of 9 configurations interleaved (staging_sweep2.py, two
# processes); TP ranks alone at n = 4 and 8 with 1, 4 and 12 (default)
# copy streams; first calls, interleaved fresh processes, default against
# 4 streams and against 1.
TAG=s11g; DEADLINE=${DEADLINE:-520}
. bench/device_preamble.sh
build_tree . build-main main
D=/var/tmp/wl_llama2-7b
mkdir -p $D; [ -f $D/model.safetensors.index.json ] || build-main/weightlift synth --layout llama2-7b --shards 2 $D > $OUT/synth.log 2>&1; cat $D/*.safetensors > /dev/null
log "build + synth done"; pack
python3 -m compileall -q build-main/python/weightlift > /dev/null 2>&1
P=bench/results/2026-12-04-h200-session11/probes
for i in 1 2; do
  fits 70 && { PYTHONPATH=build-main/python timeout 80 python3 $P/staging_sweep2.py $D 4 > $OUT/sweep_$i.log 2>&1; log "sweep $i rc $?"; cat $OUT/sweep_$i.log >> $OUT/summary.txt; pack; }
done
for s in 0 4 1; do
  o=""; [ $s != 0 ] && o="--option copy_streams=$s"
  fits 40 && { PYTHONPATH=build-main/python timeout 40 python3 bench/tp_bench.py --ckpt $D --sizes 4,8 --modes alone --no-verify --device cuda:0 $o > $OUT/tp_alone_s$s.log 2>&1; log "tp alone copy_streams=$s rc $?"; grep -E "^n=" $OUT/tp_alone_s$s.log | sed 's/(goal.*//' >> $OUT/summary.txt; pack; }
done
for r in 1 2 3; do
  for s in 0 4 1; do
    o=""; [ $s != 0 ] && o="--opt copy_streams=$s"
    fits 25 && { PYTHONPATH=build-main/python timeout 25 python3 bench/first_call.py $D --later free $o > $OUT/first_s${s}_$r.log 2>&1; log "first copy_streams=$s $r rc $? $(grep -m1 'call 1' $OUT/first_s${s}_$r.log | cut -c1-100)"; }
  done; pack
done
log end; pack
cat $OUT/summary.txt
