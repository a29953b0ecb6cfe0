# session 19, call A (~7 min): main with the row pages prepare fills
# (src/env/warm_mappings.h) in build-main, and 101f013 (session 18's main,
# carried in .probe/base) in build-base. First the GPU code of session 18
# that never ran on a GPU (the executor's cancel under pinned staging, the
# group load as one load over NCCL) and every GPU test, on main; an NCCL
# group of one against the plain load; the row-run probe (faults against
# filled page tables, 12 and 16 threads); rank 0 of 8's phases under the
# staging knobs (copy_streams=1, 8 MiB slots in a 192 MiB ring) and the
# Llama plan against all colwise; then issue 11's rates (tp_bench.py
# --prepared, n = 2, 4, 8, alone and together), base and main interleaved.
TAG=s19a; DEADLINE=${DEADLINE:-470}
. bench/device_preamble.sh
build_tree . build-main main &
B1=$!
build_tree .probe/base build-base base &
B2=$!
wait $B1; wait $B2
log "builds done"
ninja -C build-main -j16 gpu_tests dist_tests > $OUT/build_tests.log 2>&1; log "tests build rc $?"
. bench/nccl_lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/gpu.txt 2>&1
D=/var/tmp/wl_llama2-7b
(mkdir -p $D; [ -f $D/model.safetensors.index.json ] || build-main/weightlift synth --layout llama2-7b --shards 2 $D > $OUT/synth.log 2>&1; cat $D/*.safetensors > /dev/null) &
SYNTH=$!
g++ -O2 -std=c++20 -pthread bench/results/2026-12-05-h200-session19/probes/rows_prefault.cc -o /tmp/rows_prefault > $OUT/rows_build.log 2>&1
fits 60 && { (cd build-main && timeout 90 ctest -L gpu --output-on-failure) > $OUT/ctest_gpu.log 2>&1; log "ctest gpu rc $? $(grep -E 'tests passed|tests failed' $OUT/ctest_gpu.log)"; grep -E "Failed|\*\*\*" $OUT/ctest_gpu.log | head -20 >> $OUT/summary.txt; pack; }
fits 60 && { timeout 60 build-main/src/dist/dist_tests --gtest_filter='Nccl*:LoadWithGroup*' > $OUT/dist_nccl.log 2>&1; log "dist_tests nccl rc $? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $OUT/dist_nccl.log | tr '\n' ' ')"; grep -E "^\[  FAILED" $OUT/dist_nccl.log | head >> $OUT/summary.txt; pack; }
wait $SYNTH; log "synth + page cache done"
python3 -m compileall -q build-main/python/weightlift build-base/python/weightlift > /dev/null 2>&1
tp() {  # TREE TAG ARGS...
  local tree=$1 t=$2; shift 2
  fits 100 && { PYTHONPATH=$tree/python timeout 100 python3 bench/tp_bench.py --ckpt $D --sizes 2,4,8 --modes alone,together --device cuda:0 --prepared "$@" --json $OUT/tp_$t.json > $OUT/tp_$t.log 2>&1; log "tp $t rc $?"; grep -E "^n=|ceiling" $OUT/tp_$t.log | sed 's/safetensors get_slice.*//' >> $OUT/summary.txt; pack; }
}
run_phases() {  # N TAG ARGS...
  local n=$1 t=$2; shift 2
  fits 25 && { PYTHONPATH=build-main/python timeout 25 python3 bench/tp_phases.py --ckpt $D --n $n --calls 4 --device cuda:0 "$@" > $OUT/phases_${n}_$t.log 2>&1; log "phases n=$n $t rc $?"; grep -E "call [0-9]|executor:" $OUT/phases_${n}_$t.log | sed -E 's/\| C\+\+ report: //; s/; take_tp.*seconds/ | seconds/' | cut -c1-330 >> $OUT/summary.txt; }
}
phases_round() {
  run_phases 8 default
  run_phases 8 colwise --plan colwise
  run_phases 8 cs1 --option copy_streams=1
  run_phases 8 c8m --option cuda_chunk=8M --option staging=192M
  run_phases 1 default
  run_phases 1 c8m --option cuda_chunk=8M --option staging=192M
  pack
}
tp build-main main1
tp build-base base1
phases_round
tp build-main main2
tp build-base base2
for t in 12 16; do fits 40 && { timeout 40 /tmp/rows_prefault $D/model-00001-of-00002.safetensors $t 3 > $OUT/rows_prefault_$t.log 2>&1; log "rows probe $t threads rc $?"; cat $OUT/rows_prefault_$t.log >> $OUT/summary.txt; }; done
pack
fits 120 && { PYTHONPATH=build-main/python timeout 120 python3 -m pytest -q -p no:cacheprovider tests/python/test_slice_loader.py tests/python/test_cuda.py tests/python/test_prepare.py tests/python/test_lifetime.py tests/python/test_stream.py tests/python/test_tp.py tests/python/test_cancel.py tests/python/test_bench_group_one.py > $OUT/pytest_cuda.log 2>&1; log "pytest cuda rc $? $(tail -1 $OUT/pytest_cuda.log)"; grep -E "^FAILED|^ERROR" $OUT/pytest_cuda.log | head >> $OUT/summary.txt; pack; }
fits 60 && { PYTHONPATH=build-main/python timeout 60 python3 bench/group_one.py --ckpt $D --device cuda:0 --rounds 3 > $OUT/group_one.log 2>&1; log "group one rc $?"; tail -8 $OUT/group_one.log >> $OUT/summary.txt; pack; }
phases_round
log end; pack
cat $OUT/summary.txt
