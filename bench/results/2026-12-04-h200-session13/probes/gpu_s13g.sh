# session 13, call G (~5 min, main + wave k+1 registered once every worker
# has a copy out of wave k in flight; WL_PROBE_PIN_EAGER=1 restores the
# earlier order): first calls of the whole checkpoint and TP ranks alone,
# the two orders alternating in fresh processes; TP together and the copies
# ceiling; the CUDA tests.
TAG=s13g; DEADLINE=${DEADLINE:-420}
. bench/device_preamble.sh
build_tree . build-main main
( nice ninja -C build-main -j4 gpu_tests > $OUT/build_gpu_tests.log 2>&1; echo "gpu_tests build rc $?" >> $OUT/summary.txt ) &
BG=$!
D=/var/tmp/wl_llama2-7b
mkdir -p $D; [ -f $D/model.safetensors.index.json ] || build-main/weightlift synth --layout llama2-7b --shards 2 $D > $OUT/synth.log 2>&1; cat $D/*.safetensors > /dev/null
wait $BG
log "build + synth done"; pack
python3 -m compileall -q build-main/python/weightlift > /dev/null 2>&1
for r in 1 2 3 4; do
  for v in eager deferred; do
    E=""; [ $v = eager ] && E="WL_PROBE_PIN_EAGER=1"
    fits 12 && { env $E PYTHONPATH=build-main/python timeout 12 python3 bench/first_call.py $D --later free > $OUT/first_${v}_$r.log 2>&1; log "first $v $r rc $? $(grep -m1 'call 1' $OUT/first_${v}_$r.log | cut -c1-150)"; grep -m1 "registered in" $OUT/first_${v}_$r.log | sed 's/.*registered in/    waves registered in/' >> $OUT/summary.txt; pack; }
  done
done
for r in 1 2; do
  for v in eager deferred; do
    E=""; [ $v = eager ] && E="WL_PROBE_PIN_EAGER=1"
    fits 25 && { env $E PYTHONPATH=build-main/python timeout 25 python3 bench/tp_bench.py --ckpt $D --sizes 4,8 --modes alone --device cuda:0 --no-verify --json $OUT/tp_${v}_$r.json > $OUT/tp_${v}_$r.log 2>&1; log "tp alone $v $r rc $?"; grep -E "^n=" $OUT/tp_${v}_$r.log | sed 's/bytes read.*//' >> $OUT/summary.txt; pack; }
  done
done
fits 40 && { PYTHONPATH=build-main/python timeout 40 python3 bench/tp_bench.py --ckpt $D --sizes 2,4,8 --modes together,copies --device cuda:0 --json $OUT/tp_together.json > $OUT/tp_together.log 2>&1; log "tp together rc $?"; grep -E "^n=" $OUT/tp_together.log | sed 's/safetensors get_slice.*//; s/each rank alone.*bit-exact None; //' >> $OUT/summary.txt; pack; }
fits 40 && { (cd build-main && timeout 40 ctest -L gpu --output-on-failure > $OUT/ctest_gpu.log 2>&1); log "ctest -L gpu rc $? $(grep 'tests passed' $OUT/ctest_gpu.log)"; pack; }
fits 40 && { PYTHONPATH=build-main/python timeout 40 python3 -m pytest -q -x -p no:cacheprovider tests/python/test_slice_loader.py tests/python/test_cuda.py > $OUT/pytest_cuda.log 2>&1; log "pytest slices+cuda rc $? $(tail -1 $OUT/pytest_cuda.log)"; pack; }
log end; pack
cat $OUT/summary.txt
