# Session 25's plan for the next call (~9.5 min on an H200):
# - the code not yet run on a GPU, through every GPU test and the Python
#   tests that need one: the open on started workers only, the serial
#   open's stop at the first failing file (session 24), and the device
#   block prepare takes for a rank's load (session 25);
# - what the host is: cores, NUMA nodes, which node the GPU and the
#   checkpoint's cached pages sit on (bench/page_nodes.py);
# - issue 11's table twice;
# - what lets ranks 0 and 7 of 8 end 30-50 ms before the other six in
#   "together" (sessions 23 and 24): the copies of 8 processes (the GPU's
#   own ceiling for together), then together with nothing registered, with
#   each rank's 12 workers, with one copy stream a rank and with a ring 8
#   times deeper; and each rank of 8 alone with nothing registered.
TAG=s25a; DEADLINE=${DEADLINE:-570}
. bench/device_preamble.sh
D=/var/tmp/wl_llama2-7b
tp_setup build-main $D
ninja -C build-main -j16 gpu_tests > $OUT/build_tests.log 2>&1; log "tests build rc $?"
gpu_tests build-main 90 --gtest_brief=1
{
  lscpu
  echo; nvidia-smi topo -m
  echo; grep -H . /sys/bus/pci/devices/*/numa_node 2>/dev/null | grep -v -- '-1$'
  echo; cat /sys/kernel/mm/transparent_hugepage/enabled
  echo; python3 bench/page_nodes.py $D/*.safetensors
} > $OUT/host.txt 2>&1
log "host: $(grep -E '^NUMA node\(s\)' $OUT/host.txt | tr -s ' ') $(grep -E '^page nodes' $OUT/host.txt | tr '\n' ' ')"
tp_round tp1 130 build-main $D --sizes 2,4,8 --modes alone,together,peers
# The tests that need a GPU after the first table, which checks every rank
# bit-exact too: the table is what issue 11 waits for.
gpu_pytest build-main pytest_cuda 120 tests/python/test_tp.py tests/python/test_prepare.py tests/python/test_cuda.py
tp_round tp2 110 build-main $D --sizes 2,4,8 --modes alone,together
tp_round t8_copies 25 build-main $D --sizes 8 --modes copies
tp_round t8_off 30 build-main $D --sizes 8 --modes together --option host_register=off
tp_round a8_off 40 build-main $D --sizes 8 --modes alone --option host_register=off
tp_round t8_lws 30 build-main $D --sizes 8 --modes together --no-local-world-size
tp_round t8_cs1 30 build-main $D --sizes 8 --modes together --option copy_streams=1
# Each rank's ring 8x deeper (128 MiB of a 1 GiB budget shared by 8):
# more of a rank's copies queued when its context gets the copy engine.
tp_round t8_ring 30 build-main $D --sizes 8 --modes together --option staging_bytes=1073741824
log end; pack
cat $OUT/summary.txt
