# Session 25's plan for the next call (~8 min on an H200): the code not yet
# run on a GPU (the open on started workers only, the serial open's stop at
# the first failing file) through every GPU test; what the host is (cores,
# NUMA nodes, which node the GPU and the checkpoint's cached pages sit on);
# issue 11's table twice; then "together" at n = 8 three other ways, to
# find what lets ranks 0 and 7 end 30-50 ms before the other six (sessions
# 23 and 24): nothing registered, each rank's 12 workers, one copy stream a
# rank; and the copies of 8 processes, the GPU's own ceiling for together;
# and each rank of 8 alone with nothing registered (all staged).
TAG=s25a; DEADLINE=${DEADLINE:-510}
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
tp_round tp2 110 build-main $D --sizes 2,4,8 --modes alone,together
tp_round t8_copies 25 build-main $D --sizes 8 --modes copies
tp_round t8_off 30 build-main $D --sizes 8 --modes together --option host_register=off
tp_round a8_off 40 build-main $D --sizes 8 --modes alone --option host_register=off
tp_round t8_lws 30 build-main $D --sizes 8 --modes together --no-local-world-size
tp_round t8_cs1 30 build-main $D --sizes 8 --modes together --option copy_streams=1
log end; pack
cat $OUT/summary.txt
