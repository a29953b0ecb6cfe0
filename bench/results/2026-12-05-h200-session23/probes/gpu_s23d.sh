# Session 23, call D (~6 min, on an H200; call C ran on an H100): main with row-parallel parts
# staged at every n (kMaxRegisteredPerSelected 1.5, from call B): its GPU
# tests, then issue 11's table in one run (tp_bench.py --prepared --spawn,
# n = 2, 4, 8, alone, together and the peers), then two more rounds without
# the peers.
# D also runs every GPU test (the loader gained a phases note), one round fewer.
TAG=s23d; DEADLINE=${DEADLINE:-560}
. bench/device_preamble.sh
build_tree . build-main main
ninja -C build-main -j16 gpu_tests > $OUT/build_tests.log 2>&1; log "tests build rc $?"
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/gpu.txt 2>&1
D=/var/tmp/wl_llama2-7b
(mkdir -p $D; [ -f $D/model.safetensors.index.json ] || build-main/weightlift synth --layout llama2-7b --shards 2 $D > $OUT/synth.log 2>&1; cat $D/*.safetensors > /dev/null) &
SYNTH=$!
fits 90 && { timeout 90 build-main/tests/gpu/gpu_tests --gtest_brief=1 > $OUT/gpu_spine.log 2>&1; log "gpu_tests rc $? $(grep -E '^\[  (PASSED|FAILED) ' $OUT/gpu_spine.log | tr '\n' ' ')"; pack; }
python3 -m compileall -q build-main/python/weightlift > /dev/null 2>&1
fits 60 && { PYTHONPATH=build-main/python timeout 60 python3 -m pytest -q -p no:cacheprovider tests/python/test_tp.py tests/python/test_prepare.py -k "cuda or prepared" -rs > $OUT/pytest_tp.log 2>&1; log "pytest tp cuda rc $? $(tail -1 $OUT/pytest_tp.log)"; pack; }
wait $SYNTH; log "synth + page cache done"
fits 150 && { PYTHONPATH=build-main/python timeout 150 python3 bench/tp_bench.py --ckpt $D --sizes 2,4,8 --modes alone,together,peers --device cuda:0 --prepared --spawn --json $OUT/tp.json > $OUT/tp.log 2>&1; log "tp rc $?"; grep -E "^n=|ceiling" $OUT/tp.log >> $OUT/summary.txt; pack; }
for i in 2; do
  fits 100 && { PYTHONPATH=build-main/python timeout 100 python3 bench/tp_bench.py --ckpt $D --sizes 2,4,8 --modes alone,together --device cuda:0 --prepared --spawn --json $OUT/tp$i.json > $OUT/tp$i.log 2>&1; log "tp round $i rc $?"; grep -E "^n=|ceiling" $OUT/tp$i.log >> $OUT/summary.txt; pack; }
done
log end; pack
cat $OUT/summary.txt
