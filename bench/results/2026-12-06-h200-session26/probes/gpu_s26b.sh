# Session 26 call B (~6 min): which "together" setting to make the default
# for ranks sharing a GPU. Call A (an H100) had together at n = 8 at 0.85x
# / 0.87x by default (each rank its share: 2 workers, 2 copy streams, a
# 16 MiB ring), 0.91x with each rank's 12 workers (no LOCAL_WORLD_SIZE) and
# 0.90x with one copy stream a rank: one run each. Here three rounds of
# each, interleaved, at n = 2, 4 and 8.
TAG=s26b; DEADLINE=${DEADLINE:-330}
. bench/device_preamble.sh
D=/var/tmp/wl_llama2-7b
tp_setup build-main $D
for i in 1 2 3; do
  tp_round def_$i 45 build-main $D --modes together
  tp_round lws_$i 45 build-main $D --modes together --no-local-world-size
  tp_round cs1_$i 45 build-main $D --modes together --option copy_streams=1

done
log end; pack
cat $OUT/summary.txt
