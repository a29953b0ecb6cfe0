# session 22, call A (~7 min): prepare registers per selection and the load
# copies the registered selections in place beside the staged rest, in one
# run (src/exec/split_sink.h). Every GPU test, the tensor-parallel and
# prepare Python tests on CUDA, then where a rank's time goes
# (bench/registered_rank.py) at n = 8, 4, 2: auto (the row-parallel parts
# staged beside the registered rest), forced (host_register=on: everything
# registered, as session 21's path did) and staged (host_register=off).
TAG=s22a; DEADLINE=${DEADLINE:-560}
. bench/device_preamble.sh
build_tree . build-main main
ninja -C build-main -j16 gpu_tests > $OUT/build_tests.log 2>&1; log "tests build rc $?"
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/gpu.txt 2>&1
D=/var/tmp/wl_llama2-7b
(mkdir -p $D; [ -f $D/model.safetensors.index.json ] || build-main/weightlift synth --layout llama2-7b --shards 2 $D > $OUT/synth.log 2>&1; cat $D/*.safetensors > /dev/null) &
SYNTH=$!
fits 90 && { (cd build-main && timeout 90 ctest -L gpu --output-on-failure) > $OUT/ctest_gpu.log 2>&1; log "ctest gpu rc $? $(grep -E 'tests passed|tests failed' $OUT/ctest_gpu.log)"; grep -E "Failed|\*\*\*|Failure" -A3 $OUT/ctest_gpu.log | head -30 >> $OUT/summary.txt; pack; }
python3 -m compileall -q build-main/python/weightlift > /dev/null 2>&1
fits 90 && { PYTHONPATH=build-main/python timeout 90 python3 -m pytest -q -p no:cacheprovider tests/python/test_tp.py tests/python/test_prepare.py tests/python/test_cuda.py -rs > $OUT/pytest_cuda.log 2>&1; log "pytest cuda rc $? $(tail -1 $OUT/pytest_cuda.log)"; grep -E "^FAILED|^ERROR|^E " $OUT/pytest_cuda.log | head -20 >> $OUT/summary.txt; pack; }
wait $SYNTH; log "synth + page cache done"
rr() {  # TAG ARGS...
  local t=$1; shift
  fits 75 && { PYTHONPATH=build-main/python timeout 75 python3 bench/registered_rank.py --ckpt $D "$@" > $OUT/rr_$t.log 2>&1; log "rr $t rc $?"; grep -v executor $OUT/rr_$t.log | cut -c1-330 >> $OUT/summary.txt; pack; }
}
rr n8 --n 8 --variant auto: --variant forced:host_register=on --variant staging:host_register=off
rr n8w02 --n 8 --wait 0.2 --variant auto: --variant staging:host_register=off
rr n4 --n 4 --variant auto: --variant forced:host_register=on --variant staging:host_register=off
rr n2 --n 2 --variant auto: --variant staging:host_register=off
log end; pack
cat $OUT/summary.txt
