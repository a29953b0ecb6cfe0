# session 9, call E (~5 min): main with the whole ring written and registered
# at loader creation: GPU tests, CUDA Python tests, two fresh first calls.
TAG=s9e . bench/device_preamble.sh
build_tree . build-gpu main
( ninja -C build-gpu -j16 gpu_tests > $OUT/build_gpu_tests.log 2>&1; echo "gpu_tests build rc $?" >> $OUT/summary.txt ) &
D=/var/tmp/wl_llama2-7b
mkdir -p $D; [ -f $D/model.safetensors.index.json ] || build-gpu/weightlift synth --layout llama2-7b --shards 2 $D > $OUT/synth.log 2>&1; cat $D/*.safetensors > /dev/null
wait
log "build + synth done"; pack
( cd build-gpu && timeout 150 ctest -L gpu --output-on-failure ) > $OUT/ctest_gpu.log 2>&1; log "ctest -L gpu rc $? $(grep -E 'tests passed|tests failed' $OUT/ctest_gpu.log)"; pack
export PYTHONPATH=build-gpu/python
fits 100 && { timeout 120 python3 -m pytest -q -rs -p no:cacheprovider tests/python/test_cuda.py tests/python/test_tp.py tests/python/test_dropin_dtypes.py tests/python/test_group_await.py > $OUT/pytest_cuda.log 2>&1; log "pytest cuda rc $? $(tail -1 $OUT/pytest_cuda.log)"; pack; }
for i in 1 2; do
  fits 15 && { timeout 25 python3 bench/first_call.py $D --later free,keep > $OUT/first_call_$i.log 2>&1; log "first_call $i rc $? $(grep -m1 'call 1' $OUT/first_call_$i.log | cut -c1-100)"; pack; }
done
log end; pack
cat $OUT/summary.txt
