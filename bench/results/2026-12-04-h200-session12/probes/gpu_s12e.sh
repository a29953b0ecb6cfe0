# session 12, call E (~4 min, main): where a TP rank's transfer loses per
# byte (tp_shape.py: the Llama plan against all-colwise and all-rowwise
# plans and the whole checkpoint, later calls interleaved, two processes),
# then more first calls of main's default (fresh processes).
TAG=s12e; DEADLINE=${DEADLINE:-235}
. bench/device_preamble.sh
(lscpu; uptime; top -bn1 | head -15) > $OUT/machine.txt 2>&1
build_tree . build-main main
D=/var/tmp/wl_llama2-7b
mkdir -p $D; [ -f $D/model.safetensors.index.json ] || build-main/weightlift synth --layout llama2-7b --shards 2 $D > $OUT/synth.log 2>&1; cat $D/*.safetensors > /dev/null
log "build + synth done"; pack
python3 -m compileall -q build-main/python/weightlift > /dev/null 2>&1
P=bench/results/2026-12-04-h200-session12/probes
for i in 1 2; do
  fits 45 && { PYTHONPATH=build-main/python timeout 45 python3 $P/tp_shape.py $D 5 > $OUT/tp_shape_$i.log 2>&1; log "tp_shape $i rc $?"; cat $OUT/tp_shape_$i.log >> $OUT/summary.txt; pack; }
done
for r in 1 2 3 4 5 6; do
  fits 12 && { PYTHONPATH=build-main/python timeout 12 python3 bench/first_call.py $D --later free,keep > $OUT/first_$r.log 2>&1; log "first $r rc $? $(grep -m1 'call 1' $OUT/first_$r.log | cut -c1-110)"; pack; }
done
log end; pack
cat $OUT/summary.txt
