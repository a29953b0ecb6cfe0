# Session 27 call C (~7.5 min): issue 11's table of this code (one copy
# stream a rank when local_world_size > 1) on whichever host comes, and
# which host it is: call A's host (057f452) met both goals at every n,
# call B's (4772f18) missed both by default and with the old stream count
# (its pinned-copy ceiling wandered 52.1-54.5 GB/s). Then each rank of 8
# alone with LOCAL_WORLD_SIZE=8 under the new default (call B's 40 s ran
# out), and one more round of together, new against old.
TAG=s27c; DEADLINE=${DEADLINE:-480}
. bench/device_preamble.sh
{
  lscpu; echo; free -g; echo; nvidia-smi -q | grep -iE "link|gen|width|clocks" | head -30
} > $OUT/host.txt 2>&1
log "host: $(grep -E '^Model name' $OUT/host.txt | tr -s ' ')"
D=/var/tmp/wl_llama2-7b
tp_setup build-main $D
tp_round tp 130 build-main $D --sizes 2,4,8 --modes alone,together,peers
tp_round alone_new_8 80 build-main $D --sizes 8 --modes alone \
  --option local_world_size=8
tp_round new_3 40 build-main $D --modes together
tp_round old_3 40 build-main $D --modes together --option copy_streams=16
log end; pack
cat $OUT/summary.txt
