# session 9, call C (~6 min): GPU tests of the ordered staging ring (new,
# working tree), then an interleaved A/B of first calls: old (f9dd704, .ab/old),
# new, new with cuda_chunk=1M, 3 rounds; tp_bench alone n=2,8 for old and new.
TAG=s9c . bench/device_preamble.sh
build_tree . build-new new & build_tree .ab/old build-old old & wait
( ninja -C build-new -j12 gpu_tests > $OUT/build_gpu_tests.log 2>&1; echo "gpu_tests build rc $?" >> $OUT/summary.txt ) &
D=/var/tmp/wl_llama2-7b
mkdir -p $D; [ -f $D/model.safetensors.index.json ] || build-new/weightlift synth --layout llama2-7b --shards 2 $D > $OUT/synth.log 2>&1; cat $D/*.safetensors > /dev/null
wait
log "builds + synth done"; pack
( cd build-new && timeout 150 ctest -L gpu --output-on-failure ) > $OUT/ctest_gpu.log 2>&1; log "ctest -L gpu rc $? $(grep -E 'tests passed|tests failed' $OUT/ctest_gpu.log)"; pack
for r in 1 2 3; do
  for v in old new new1M; do
    b=${v%1M}; o=""; [ $v = new1M ] && o="--opt cuda_chunk=1M"
    fits 15 && { PYTHONPATH=build-$b/python timeout 25 python3 bench/first_call.py $D --later free,keep $o > $OUT/first_${v}_$r.log 2>&1; log "first $v $r rc $? $(grep -m1 'call 1' $OUT/first_${v}_$r.log | cut -c1-100)"; }
  done; pack
done
for v in old new; do
  fits 40 && { PYTHONPATH=build-$v/python timeout 60 python3 bench/tp_bench.py --ckpt $D --sizes 2,8 --modes alone --no-verify --device cuda:0 > $OUT/tp_alone_$v.log 2>&1; log "tp_bench alone $v rc $?"; grep -E "^n=" $OUT/tp_alone_$v.log | sed 's/(goal.*//' >> $OUT/summary.txt; pack; }
done
log end; pack
cat $OUT/summary.txt
