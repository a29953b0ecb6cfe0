# Session 24, call B (~4 min): issue 11's table with the peers, and why
# "together" falls short at n = 8. In call A (an H100), as in session 23's
# call D, ranks 0 and 7 ended 30-50 ms before the other six, every rank's
# registration done before the barrier; session 11 found n processes'
# pinned copies at 0.96-1.00x of the ceiling, so the GPU is not the limit.
# Together at n = 8 with nothing registered (host_register=off) and with
# each rank's 12 workers (no LOCAL_WORLD_SIZE), and one copy stream a
# rank (which copy engines a context's streams land on), after the table.
TAG=s24b; DEADLINE=${DEADLINE:-260}
. bench/device_preamble.sh
D=/var/tmp/wl_llama2-7b
tp_setup build-main $D
tp_round tp 130 build-main $D --sizes 2,4,8 --modes alone,together,peers
tp_round t8_off 30 build-main $D --sizes 8 --modes together --option host_register=off
tp_round t8_lws 30 build-main $D --sizes 8 --modes together --no-local-world-size
tp_round t8_cs1 30 build-main $D --sizes 8 --modes together --option copy_streams=1
log end; pack
cat $OUT/summary.txt
