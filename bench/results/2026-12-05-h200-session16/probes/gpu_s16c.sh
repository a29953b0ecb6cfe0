# session 16, call C (~4 min, main): issue 13's first calls of the whole
# Llama-2-7B checkpoint in fresh processes (bench/first_call.py), with and
# without weightlift.prepare before the clock, alternating.
TAG=s16c; DEADLINE=${DEADLINE:-280}
. bench/device_preamble.sh
[ -x build-main/weightlift ] || build_tree . build-main main
D=/var/tmp/wl_llama2-7b
mkdir -p $D; [ -f $D/model.safetensors.index.json ] || build-main/weightlift synth --layout llama2-7b --shards 2 $D > $OUT/synth.log 2>&1; cat $D/*.safetensors > /dev/null
log "build + synth done"; pack
python3 -m compileall -q build-main/python/weightlift > /dev/null 2>&1
for r in 1 2 3; do
  for mode in fresh prepared; do
    flag=""; [ $mode = prepared ] && flag=--prepared
    fits 14 && { PYTHONPATH=build-main/python timeout 14 python3 bench/first_call.py $D --later free $flag > $OUT/first_${mode}_$r.log 2>&1; log "first $mode $r $(grep -m1 'call 1' $OUT/first_${mode}_$r.log | cut -c1-120) | $(grep -m1 'call 2' $OUT/first_${mode}_$r.log | cut -c1-70)"; pack; }
  done
done
log end; pack
cat $OUT/summary.txt
