# The next session's first call (~7 min): which "together" setting to make
# the default for ranks sharing a GPU, then issue 11's table. Session 26's
# call A (an H100) had together at n = 8 at 0.85x / 0.87x by default (each
# rank its share: 2 workers, a copy stream each, a 16 MiB ring), 0.90x with
# one copy stream a rank and 0.91x with each rank's 12 workers (no
# LOCAL_WORLD_SIZE): one round each, nothing at n = 2 or 4. Here three
# interleaved rounds of each at n = 2, 4 and 8; then the table with the
# peers.
TAG=s27a; DEADLINE=${DEADLINE:-450}
. bench/device_preamble.sh
D=/var/tmp/wl_llama2-7b
tp_setup build-main $D
for i in 1 2 3; do
  tp_round def_$i 40 build-main $D --modes together
  tp_round cs1_$i 40 build-main $D --modes together --option copy_streams=1
  tp_round lws_$i 40 build-main $D --modes together --no-local-world-size
done
tp_round tp 130 build-main $D --sizes 2,4,8 --modes alone,together,peers
log end; pack
cat $OUT/summary.txt
