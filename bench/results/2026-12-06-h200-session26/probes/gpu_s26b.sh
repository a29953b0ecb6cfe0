# Session 26 call B (~5.5 min): ranks loading at once copy on one stream
# each (copy_streams auto = 1 when local_world_size > 1). Call A (an H100)
# had together at n = 8 at 0.85x / 0.87x with a stream per worker, 0.90x
# with one stream a rank and 0.91x with each rank's 12 workers (no
# LOCAL_WORLD_SIZE), one round each. Here issue 11's table of this code,
# then together in rounds interleaved: the new default, the old one
# (copy_streams=16: a stream per worker, capped by the workers) and no
# LOCAL_WORLD_SIZE.
TAG=s26b; DEADLINE=${DEADLINE:-330}
. bench/device_preamble.sh
D=/var/tmp/wl_llama2-7b
tp_setup build-main $D
tp_round tp 90 build-main $D --sizes 2,4,8 --modes alone,together
for i in 1 2; do
  tp_round new_$i 40 build-main $D --modes together
  tp_round old_$i 40 build-main $D --modes together --option copy_streams=16
  tp_round lws_$i 40 build-main $D --modes together --no-local-world-size
done
log end; pack
cat $OUT/summary.txt
