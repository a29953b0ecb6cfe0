# session 13, call E (~5 min, main + row-run mappings unmapped in the
# background): rank 0 under three plans and the whole load, later calls
# interleaved; TP ranks alone, together, and the copies ceiling of n
# contexts at once; a rank's first call step by step at n=4 and n=8; first
# calls of the whole checkpoint.
TAG=s13e; DEADLINE=${DEADLINE:-480}
. bench/device_preamble.sh
build_tree . build-main main
D=/var/tmp/wl_llama2-7b
mkdir -p $D; [ -f $D/model.safetensors.index.json ] || build-main/weightlift synth --layout llama2-7b --shards 2 $D > $OUT/synth.log 2>&1; cat $D/*.safetensors > /dev/null
log "build + synth done"; pack
python3 -m compileall -q build-main/python/weightlift > /dev/null 2>&1
fits 60 && { PYTHONPATH=build-main/python timeout 60 python3 bench/interleaved.py $D --rounds 4 --config whole --config "r8 llama" tp_rank=0 tp_size=8 tp_plan=llama --config "r8 rowwise" tp_rank=0 tp_size=8 tp_plan=rowwise --config "r4 llama" tp_rank=0 tp_size=4 tp_plan=llama --config "r2 llama" tp_rank=0 tp_size=2 tp_plan=llama > $OUT/interleaved.log 2>&1; log "interleaved rc $?"; grep -A9 "^ceiling" $OUT/interleaved.log >> $OUT/summary.txt; pack; }
fits 120 && { PYTHONPATH=build-main/python timeout 120 python3 bench/tp_bench.py --ckpt $D --sizes 2,4,8 --modes alone,together,copies --device cuda:0 --json $OUT/tp_bench.json > $OUT/tp_bench.log 2>&1; log "tp_bench rc $?"; grep -E "^n=" $OUT/tp_bench.log | sed 's/safetensors get_slice.*//' >> $OUT/summary.txt; pack; }
for n in 8 4; do
  fits 30 && { PYTHONPATH=build-main/python timeout 30 python3 bench/tp_phases.py --ckpt $D --n $n --calls 3 > $OUT/tp_phases_$n.log 2>&1; log "tp_phases $n rc $?"; cut -c1-500 $OUT/tp_phases_$n.log | grep -v "file:" >> $OUT/summary.txt; pack; }
done
for r in 1 2; do
  fits 12 && { PYTHONPATH=build-main/python timeout 12 python3 bench/first_call.py $D --later free,keep > $OUT/first_$r.log 2>&1; log "first $r rc $? $(grep -m1 'call 1' $OUT/first_$r.log | cut -c1-110)"; pack; }
done
log end; pack
cat $OUT/summary.txt
