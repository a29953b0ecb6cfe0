# session 11, call J (~3 min): where a TP rank's first call goes (the first
# call's extra is most of what separates n = 4 and 8 from 45 GB/s):
# session 10's first_call_timeline.py, rank 0 of 8 and of 4 and the whole
# checkpoint, two fresh processes each, 3 calls per process.
TAG=s11j; DEADLINE=${DEADLINE:-300}
. bench/device_preamble.sh
build_tree . build-main main
D=/var/tmp/wl_llama2-7b
mkdir -p $D; [ -f $D/model.safetensors.index.json ] || build-main/weightlift synth --layout llama2-7b --shards 2 $D > $OUT/synth.log 2>&1; cat $D/*.safetensors > /dev/null
log "build + synth done"; pack
python3 -m compileall -q build-main/python/weightlift > /dev/null 2>&1
P=bench/results/2026-12-04-h200-session10/probes/first_call_timeline.py
for i in 1 2; do
  for n in 8 4 0; do
    a=""; [ $n != 0 ] && a=$n
    fits 20 && { PYTHONPATH=build-main/python timeout 25 python3 $P $D 3 $a > $OUT/timeline_n${n}_$i.log 2>&1; log "timeline n=$n $i rc $? $(grep -m1 'call 0' $OUT/timeline_n${n}_$i.log)"; }
  done; pack
done
log end; pack
cat $OUT/summary.txt
