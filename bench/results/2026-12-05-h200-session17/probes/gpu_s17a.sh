# session 17, call A (~6 min, main): every GPU test again on main since
# session 16's call A (the automatic group batch size, ReadCounts written by
# the placement, a batch's report through AddReads); the automatic batch
# size against 256 MiB on an NCCL group of one; then where a rank's time
# goes at n = 8 and 4 (tp_phases.py, rank 0 in one process) under the
# staging knobs: threads, the CUDA slot and the ring.
TAG=s17a; DEADLINE=${DEADLINE:-450}
. bench/device_preamble.sh
build_tree . build-main main
ninja -C build-main -j16 gpu_tests dist_tests > $OUT/build_tests.log 2>&1; log "tests build rc $?"
NCCL_LIB=$(python3 -c "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'lib'))" 2>/dev/null)
export LD_LIBRARY_PATH=${NCCL_LIB}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/gpu.txt 2>&1
D=/var/tmp/wl_llama2-7b
(mkdir -p $D; [ -f $D/model.safetensors.index.json ] || build-main/weightlift synth --layout llama2-7b --shards 2 $D > $OUT/synth.log 2>&1; cat $D/*.safetensors > /dev/null) &
SYNTH=$!
fits 60 && { (cd build-main && timeout 90 ctest -L gpu --output-on-failure) > $OUT/ctest_gpu.log 2>&1; log "ctest gpu rc $? $(grep -E 'tests passed|tests failed' $OUT/ctest_gpu.log)"; grep -E "Failed|Skipped" $OUT/ctest_gpu.log | head -20 >> $OUT/summary.txt; pack; }
fits 60 && { timeout 60 build-main/src/dist/dist_tests --gtest_filter='Nccl*:LoadWithGroup*' > $OUT/dist_nccl.log 2>&1; log "dist_tests nccl rc $? $(grep -E '^\[  (PASSED|FAILED) ' $OUT/dist_nccl.log | tr '\n' ' ')"; pack; }
wait $SYNTH; log "synth + page cache done"
fits 150 && { PYTHONPATH=build-main/python timeout 150 python3 -m pytest -q -p no:cacheprovider tests/python/test_slice_loader.py tests/python/test_cuda.py tests/python/test_prepare.py tests/python/test_lifetime.py tests/python/test_stream.py tests/python/test_tp.py > $OUT/pytest_cuda.log 2>&1; log "pytest cuda rc $? $(tail -1 $OUT/pytest_cuda.log)"; grep -E "^FAILED|^ERROR" $OUT/pytest_cuda.log | head >> $OUT/summary.txt; pack; }
python3 -m compileall -q build-main/python/weightlift > /dev/null 2>&1
fits 60 && { PYTHONPATH=build-main/python timeout 60 python3 bench/results/2026-12-05-h200-session16/probes/group_batches.py $D auto > $OUT/group_batches_auto.log 2>&1; log "group batches auto rc $?"; cat $OUT/group_batches_auto.log >> $OUT/summary.txt; pack; }
run_phases() {  # N TAG OPTION...
  local n=$1 t=$2; shift 2
  local opts=""; for o in "$@"; do opts="$opts --option $o"; done
  fits 25 && { PYTHONPATH=build-main/python timeout 25 python3 bench/tp_phases.py --ckpt $D --n $n --calls 4 $opts > $OUT/phases_${n}_$t.log 2>&1; log "phases n=$n $t rc $?"; grep -E "call [0-9]" $OUT/phases_${n}_$t.log | sed -E 's/\| C\+\+ report: //' | cut -c1-330 >> $OUT/summary.txt; pack; }
}
for round in 1 2; do
  run_phases 8 default
  run_phases 8 t16 threads=16
  run_phases 8 t14 threads=14
  run_phases 8 c4m cuda_chunk=4M
  run_phases 8 c16m cuda_chunk=16M
  run_phases 8 s192m staging=192M
  run_phases 4 default
  run_phases 4 t16 threads=16
done
log end; pack
cat $OUT/summary.txt
