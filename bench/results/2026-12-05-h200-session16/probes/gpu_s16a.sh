# session 16, call A (~9 min, main): everything GPU since session 14 is
# tested: ctest -L gpu (device guard, group over ThreadGroup refused), the
# C++ NCCL group over JoinNcclGroup (a group of one: full and TP parts
# bit-exact), the CLI's group id handling and a CLI group of one, the
# Python CUDA tests. Then the Llama-2-7B checkpoint for the next calls.
TAG=s16a; DEADLINE=${DEADLINE:-560}
. bench/device_preamble.sh
build_tree . build-main main
log "build cli+python done"; pack
ninja -C build-main -j16 gpu_tests dist_tests cli_tests > $OUT/build_tests.log 2>&1; log "tests build rc $?"
NCCL_LIB=$(python3 -c "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'lib'))" 2>/dev/null)
export LD_LIBRARY_PATH=${NCCL_LIB}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
log "libnccl from $NCCL_LIB"
nvidia-smi --query-gpu=name,driver_version,clocks.max.memory --format=csv > $OUT/gpu.txt 2>&1
fits 60 && { (cd build-main && timeout 90 ctest -L gpu --output-on-failure) > $OUT/ctest_gpu.log 2>&1; log "ctest gpu rc $? $(grep -E 'tests passed|tests failed' $OUT/ctest_gpu.log)"; grep -E "Failed|Skipped" $OUT/ctest_gpu.log | head -20 >> $OUT/summary.txt; pack; }
fits 60 && { timeout 60 build-main/src/dist/dist_tests --gtest_filter='Nccl*:LoadWithGroup*' > $OUT/dist_nccl.log 2>&1; log "dist_tests nccl rc $? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $OUT/dist_nccl.log | tr '\n' ' ')"; pack; }
fits 30 && { timeout 30 build-main/tools/cli_tests --gtest_filter='GroupFlags*' > $OUT/cli_group.log 2>&1; log "cli_tests group rc $? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $OUT/cli_group.log | tr '\n' ' ')"; pack; }
T=/tmp/wl_tiny_s16; rm -rf $T; build-main/weightlift synth --layout tinyllama-1.1b --shards 2 $T > $OUT/synth_tiny.log 2>&1
for tp in "" "--tp-plan bench/llama_plan.json"; do
  fits 40 && { timeout 40 build-main/weightlift load $T --device cuda:0 --group nccl --group-rank 0 --group-size 1 --nccl-id $OUT/g.id $tp --json > $OUT/cli_group1.json 2> $OUT/cli_group1.err; rc=$?; log "cli group of one [$tp] rc $rc id-left $([ -e $OUT/g.id ] && echo yes || echo no) $(python3 -c "import json; r=json.load(open('$OUT/cli_group1.json')); print('bytes', r['bytes'], 'read', r['bytes_read'], 'GB/s %.1f' % r['gb_per_s'], 'tp', r['tensor_parallel'], 'notes', len(r['notes']))" 2>&1 | tail -1)"; tail -3 $OUT/cli_group1.err >> $OUT/summary.txt; }
done
fits 150 && { PYTHONPATH=build-main/python timeout 150 python3 -m pytest -q -p no:cacheprovider tests/python/test_slice_loader.py tests/python/test_cuda.py tests/python/test_prepare.py tests/python/test_lifetime.py tests/python/test_stream.py tests/python/test_tp.py > $OUT/pytest_cuda.log 2>&1; log "pytest cuda rc $? $(tail -1 $OUT/pytest_cuda.log)"; grep -E "^FAILED|^ERROR" $OUT/pytest_cuda.log | head >> $OUT/summary.txt; pack; }
D=/var/tmp/wl_llama2-7b
fits 100 && { mkdir -p $D; [ -f $D/model.safetensors.index.json ] || timeout 100 build-main/weightlift synth --layout llama2-7b --shards 2 $D > $OUT/synth.log 2>&1; log "synth 7b rc $?"; }
log end; pack
cat $OUT/summary.txt
