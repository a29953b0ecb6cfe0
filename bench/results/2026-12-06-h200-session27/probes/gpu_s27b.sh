# Session 27 call B (~7.5 min): the code with one copy stream a rank when
# local_world_size > 1 (call A, an H100: together with copy_streams=1 was
# 0.91-0.95x in all nine rounds at n = 2, 4 and 8, the old default
# 0.85-0.95x). Here: the GPU tests (a new one: a co-located rank copies on
# one stream, bit-exact); issue 11's table of this code with the peers;
# together, new default against the old (copy_streams=16: a stream per
# worker, capped by the workers) in interleaved rounds; each rank alone
# on the GPU told that n processes share the host (LOCAL_WORLD_SIZE as
# torchrun sets it on a host of n GPUs), new against old, which is what
# the new default changes for a rank that has its GPU to itself; then the
# Python GPU tests.
TAG=s27b; DEADLINE=${DEADLINE:-560}
. bench/device_preamble.sh
D=/var/tmp/wl_llama2-7b
tp_setup build-main $D
ninja -C build-main -j16 gpu_tests > $OUT/build_tests.log 2>&1; log "tests build rc $?"
gpu_tests build-main 90 --gtest_brief=1
tp_round tp 130 build-main $D --sizes 2,4,8 --modes alone,together,peers
for i in 1 2; do
  tp_round new_$i 40 build-main $D --modes together
  tp_round old_$i 40 build-main $D --modes together --option copy_streams=16
done
for n in 8 4; do
  tp_round alone_new_$n 40 build-main $D --sizes $n --modes alone \
    --option local_world_size=$n
  tp_round alone_old_$n 40 build-main $D --sizes $n --modes alone \
    --option local_world_size=$n --option copy_streams=16
done
gpu_pytest build-main pytest_cuda 120 tests/python/test_tp.py tests/python/test_prepare.py tests/python/test_cuda.py
log end; pack
cat $OUT/summary.txt
