# session 14, call B (~8 min, main with weightlift.prepare): the GPU tests;
# TP ranks alone and together, first calls on the clock against loaders
# prepared before it (tp_bench.py --prepared), two rounds interleaved; a
# rank's first call step by step with the report's phases.
TAG=s14b; DEADLINE=${DEADLINE:-540}
. bench/device_preamble.sh
build_tree . build-main main
D=/var/tmp/wl_llama2-7b
mkdir -p $D; [ -f $D/model.safetensors.index.json ] || build-main/weightlift synth --layout llama2-7b --shards 2 $D > $OUT/synth.log 2>&1; cat $D/*.safetensors > /dev/null
log "build + synth done"; pack
python3 -m compileall -q build-main/python/weightlift > /dev/null 2>&1
for round in 1 2; do
  for mode in default prepared; do
    flag=""; [ $mode = prepared ] && flag=--prepared
    fits 90 && { PYTHONPATH=build-main/python timeout 90 python3 bench/tp_bench.py --ckpt $D --sizes 2,4,8 --modes alone,together --device cuda:0 $flag --json $OUT/tp_${mode}_$round.json > $OUT/tp_${mode}_$round.log 2>&1; log "tp $mode $round rc $?"; grep -E "^n=" $OUT/tp_${mode}_$round.log | sed 's/safetensors get_slice.*//' >> $OUT/summary.txt; pack; }
  done
done
for n in 8 4; do
  fits 30 && { PYTHONPATH=build-main/python timeout 30 python3 bench/tp_phases.py --ckpt $D --n $n --calls 3 > $OUT/tp_phases_$n.log 2>&1; log "tp_phases $n rc $?"; grep "call 0 (" $OUT/tp_phases_$n.log >> $OUT/summary.txt; pack; }
done
fits 150 && { ninja -C build-main -j16 gpu_tests > $OUT/build_gpu_tests.log 2>&1; log "gpu_tests build rc $?"; }
fits 60 && { (cd build-main && timeout 60 ctest -L gpu --output-on-failure) > $OUT/ctest_gpu.log 2>&1; log "ctest gpu rc $? $(grep -E 'tests passed|tests failed' $OUT/ctest_gpu.log)"; pack; }
fits 90 && { PYTHONPATH=build-main/python timeout 90 python3 -m pytest -q -p no:cacheprovider tests/python/test_slice_loader.py tests/python/test_cuda.py tests/python/test_prepare.py > $OUT/pytest_cuda.log 2>&1; log "pytest cuda rc $? $(tail -1 $OUT/pytest_cuda.log)"; pack; }
log end; pack
cat $OUT/summary.txt
