# For session 23, call A (~5 min, on an H200): issue 11's table in one run on
# the machine it names. Main's GPU tests of the registered-ahead path, then
# tp_bench.py --prepared --spawn at n = 2, 4 and 8 with alone, together and
# the peers (safetensors get_slice + .to, full load + narrow); then a second
# round without the peers where time is left.
TAG=s23a; DEADLINE=${DEADLINE:-560}
. bench/device_preamble.sh
build_tree . build-main main
ninja -C build-main -j16 gpu_tests > $OUT/build_tests.log 2>&1; log "tests build rc $?"
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/gpu.txt 2>&1
D=/var/tmp/wl_llama2-7b
(mkdir -p $D; [ -f $D/model.safetensors.index.json ] || build-main/weightlift synth --layout llama2-7b --shards 2 $D > $OUT/synth.log 2>&1; cat $D/*.safetensors > /dev/null) &
SYNTH=$!
fits 60 && { timeout 60 build-main/tests/gpu/gpu_tests --gtest_filter='SpineTest.*:CudaLoaderTest.HostRegister*' > $OUT/gpu_spine.log 2>&1; log "gpu_tests rc $? $(grep -E '^\[  (PASSED|FAILED) ' $OUT/gpu_spine.log | tr '\n' ' ')"; pack; }
python3 -m compileall -q build-main/python/weightlift > /dev/null 2>&1
fits 60 && { PYTHONPATH=build-main/python timeout 60 python3 -m pytest -q -p no:cacheprovider tests/python/test_tp.py -k "cuda or prepared" -rs > $OUT/pytest_tp.log 2>&1; log "pytest tp cuda rc $? $(tail -1 $OUT/pytest_tp.log)"; pack; }
wait $SYNTH; log "synth + page cache done"
fits 240 && { PYTHONPATH=build-main/python timeout 240 python3 bench/tp_bench.py --ckpt $D --sizes 2,4,8 --modes alone,together,peers --device cuda:0 --prepared --spawn --json $OUT/tp.json > $OUT/tp.log 2>&1; log "tp rc $?"; grep -E "^n=|ceiling" $OUT/tp.log >> $OUT/summary.txt; pack; }
fits 110 && { PYTHONPATH=build-main/python timeout 110 python3 bench/tp_bench.py --ckpt $D --sizes 2,4,8 --modes alone,together --device cuda:0 --prepared --spawn --json $OUT/tp2.json > $OUT/tp2.log 2>&1; log "tp round 2 rc $?"; grep -E "^n=|ceiling" $OUT/tp2.log >> $OUT/summary.txt; pack; }
log end; pack
cat $OUT/summary.txt
