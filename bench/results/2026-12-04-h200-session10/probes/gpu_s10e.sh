# session 10, call E (~3.5 min): main. Call D's sweep put 12 threads x 4 MiB
# x 2 slots (a 96 MiB ring) 0.4% ahead of the default in later calls; does
# it help the first call (a smaller ring to write and register)? Interleaved
# fresh-process first calls, default against threads=12 staging=96M, 3
# rounds; TP ranks alone n=2,4 for both.
TAG=s10e; DEADLINE=${DEADLINE:-250}
. bench/device_preamble.sh
build_tree . build-main main
D=/var/tmp/wl_llama2-7b
mkdir -p $D; [ -f $D/model.safetensors.index.json ] || build-main/weightlift synth --layout llama2-7b --shards 2 $D > $OUT/synth.log 2>&1; cat $D/*.safetensors > /dev/null
log "build + synth done"; pack
python3 -m compileall -q build-main/python/weightlift > /dev/null 2>&1
for r in 1 2 3; do
  fits 25 && { PYTHONPATH=build-main/python timeout 25 python3 bench/first_call.py $D --later free,keep > $OUT/first_default_$r.log 2>&1; log "first default $r rc $? $(grep -m1 'call 1' $OUT/first_default_$r.log | cut -c1-100)"; }
  fits 25 && { PYTHONPATH=build-main/python timeout 25 python3 bench/first_call.py $D --later free,keep --opt threads=12 --opt staging=96M > $OUT/first_t12_$r.log 2>&1; log "first t12 $r rc $? $(grep -m1 'call 1' $OUT/first_t12_$r.log | cut -c1-100)"; }
  pack
done
fits 30 && { PYTHONPATH=build-main/python timeout 40 python3 bench/tp_bench.py --ckpt $D --sizes 2,4 --modes alone --no-verify --device cuda:0 > $OUT/tp_alone_default.log 2>&1; log "tp alone default rc $?"; grep -E "^n=" $OUT/tp_alone_default.log | sed 's/(goal.*//' >> $OUT/summary.txt; pack; }
fits 30 && { PYTHONPATH=build-main/python timeout 40 python3 bench/tp_bench.py --ckpt $D --sizes 2,4 --modes alone --no-verify --device cuda:0 --option threads=12 --option staging=96M > $OUT/tp_alone_t12.log 2>&1; log "tp alone t12 rc $?"; grep -E "^n=" $OUT/tp_alone_t12.log | sed 's/(goal.*//' >> $OUT/summary.txt; pack; }
log end; pack
cat $OUT/summary.txt
