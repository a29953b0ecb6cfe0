# session 14, call C (~8 min, main): a TP rank's first call in a fresh
# process, with and without weightlift.prepare, paired and alternating
# (rank 0 of 8, 4 and 2, four rounds); tp_bench.py alone + together, with
# and without --prepared; first calls of the whole checkpoint.
TAG=s14c; DEADLINE=${DEADLINE:-540}
. bench/device_preamble.sh
build_tree . build-main main
D=/var/tmp/wl_llama2-7b
mkdir -p $D; [ -f $D/model.safetensors.index.json ] || build-main/weightlift synth --layout llama2-7b --shards 2 $D > $OUT/synth.log 2>&1; cat $D/*.safetensors > /dev/null
log "build + synth done"; pack
python3 -m compileall -q build-main/python/weightlift > /dev/null 2>&1
PYTHONPATH=build-main/python:bench python3 -c "from ceiling import pinned_copy_ceiling as c; print('ceiling %.1f GB/s' % c('cuda:0'))" > $OUT/ceiling.log 2>&1; log "$(tail -1 $OUT/ceiling.log)"
P=bench/results/2026-12-04-h200-session14/probes
for round in 1 2 3 4; do
  for n in 8 4 2; do
    for mode in fresh prepared; do
      fits 15 && { PYTHONPATH=build-main/python timeout 15 python3 $P/prepared_first.py $D $n $mode > $OUT/pf_${n}_${mode}_$round.log 2>&1; log "pf $n $mode $round $(grep -m1 'call 0' $OUT/pf_${n}_${mode}_$round.log | cut -c1-60) | later $(grep 'call 2' $OUT/pf_${n}_${mode}_$round.log | cut -c20-60)"; pack; }
    done
  done
done
for mode in prepared default; do
  flag=""; [ $mode = prepared ] && flag=--prepared
  fits 90 && { PYTHONPATH=build-main/python timeout 90 python3 bench/tp_bench.py --ckpt $D --sizes 2,4,8 --modes alone,together --device cuda:0 $flag --json $OUT/tp_${mode}.json > $OUT/tp_${mode}.log 2>&1; log "tp $mode rc $?"; grep -E "^n=" $OUT/tp_${mode}.log | sed 's/safetensors get_slice.*//' >> $OUT/summary.txt; pack; }
done
for r in 1 2; do
  fits 12 && { PYTHONPATH=build-main/python timeout 12 python3 bench/first_call.py $D --later free > $OUT/first_$r.log 2>&1; log "first $r $(grep -m1 'call 1' $OUT/first_$r.log | cut -c1-110)"; pack; }
done
log end; pack
cat $OUT/summary.txt
