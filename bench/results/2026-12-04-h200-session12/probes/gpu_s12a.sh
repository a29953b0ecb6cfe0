# session 12, call A (~7 min): larger staging copies out of a ring of the
# same size. Branch s12-probe lets a thread own one slot (WL_PROBE_ONE_SLOT).
# Later calls of 9 ring shapes interleaved (staging_sweep3.py, two
# processes); first calls, interleaved fresh processes, default against
# 12 x 8M x 1 and 16 x 6M x 1; TP ranks alone at n = 4 and 8 with each.
TAG=s12a; DEADLINE=${DEADLINE:-560}
. bench/device_preamble.sh
build_tree . build-main main
D=/var/tmp/wl_llama2-7b
mkdir -p $D; [ -f $D/model.safetensors.index.json ] || build-main/weightlift synth --layout llama2-7b --shards 2 $D > $OUT/synth.log 2>&1; cat $D/*.safetensors > /dev/null
log "build + synth done"; pack
python3 -m compileall -q build-main/python/weightlift > /dev/null 2>&1
export WL_PROBE_ONE_SLOT=1
P=bench/results/2026-12-04-h200-session12/probes
for i in 1 2; do
  fits 90 && { PYTHONPATH=build-main/python timeout 90 python3 $P/staging_sweep3.py $D 4 > $OUT/sweep_$i.log 2>&1; log "sweep $i rc $?"; cat $OUT/sweep_$i.log >> $OUT/summary.txt; pack; }
done
O8="--opt threads=12 --opt cuda_chunk=8M --opt staging=96M"
O6="--opt threads=16 --opt cuda_chunk=6M --opt staging=96M"
for r in 1 2 3; do
  for s in d 8 6; do
    o=""; [ $s = 8 ] && o="$O8"; [ $s = 6 ] && o="$O6"
    fits 25 && { PYTHONPATH=build-main/python timeout 25 python3 bench/first_call.py $D --later free,keep $o > $OUT/first_${s}_$r.log 2>&1; log "first $s $r rc $? $(grep -m1 'call 1' $OUT/first_${s}_$r.log | cut -c1-110)"; }
  done; pack
done
for s in d 8 6; do
  o=""; [ $s = 8 ] && o="${O8//--opt/--option}"; [ $s = 6 ] && o="${O6//--opt/--option}"
  fits 40 && { PYTHONPATH=build-main/python timeout 40 python3 bench/tp_bench.py --ckpt $D --sizes 4,8 --modes alone --no-verify --device cuda:0 $o > $OUT/tp_alone_$s.log 2>&1; log "tp alone $s rc $?"; grep -E "^n=" $OUT/tp_alone_$s.log | sed 's/(goal.*//' >> $OUT/summary.txt; pack; }
done
log end; pack
cat $OUT/summary.txt
