# session 10, call D (~4 min): main (s10 merged). The staging ring's shape
# swept again on today's loader (staging_sweep.py, two processes), then two
# more fresh-process first calls.
TAG=s10d; DEADLINE=${DEADLINE:-300}
. bench/device_preamble.sh
build_tree . build-main main
D=/var/tmp/wl_llama2-7b
mkdir -p $D; [ -f $D/model.safetensors.index.json ] || build-main/weightlift synth --layout llama2-7b --shards 2 $D > $OUT/synth.log 2>&1; cat $D/*.safetensors > /dev/null
log "build + synth done"; pack
python3 -m compileall -q build-main/python/weightlift > /dev/null 2>&1
for r in 1 2; do
  fits 50 && { PYTHONPATH=build-main/python timeout 60 python3 bench/results/2026-12-04-h200-session10/probes/staging_sweep.py $D 4 > $OUT/staging_sweep_$r.log 2>&1; log "staging sweep $r rc $?"; cat $OUT/staging_sweep_$r.log >> $OUT/summary.txt; pack; }
done
for r in 1 2; do
  fits 20 && { PYTHONPATH=build-main/python timeout 25 python3 bench/first_call.py $D --later free,keep > $OUT/first_main_$r.log 2>&1; log "first main $r rc $? $(grep -m1 'call 1' $OUT/first_main_$r.log | cut -c1-100)"; }
done
log end; pack
cat $OUT/summary.txt
