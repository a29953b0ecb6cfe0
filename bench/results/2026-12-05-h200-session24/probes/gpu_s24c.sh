# Session 24, call C (what 267 s of budget allows): call B's experiments
# without the table. Together at n = 8 as before, then with nothing
# registered (host_register=off), one copy stream a rank, and each rank's
# 12 workers (no LOCAL_WORLD_SIZE): which, if any, evens out ranks 0 and 7
# against the other six.
TAG=s24c; DEADLINE=${DEADLINE:-150}
. bench/device_preamble.sh
D=/var/tmp/wl_llama2-7b
tp_setup build-main $D
tp_round t8 25 build-main $D --sizes 8 --modes together
tp_round t8_off 25 build-main $D --sizes 8 --modes together --option host_register=off
tp_round t8_cs1 25 build-main $D --sizes 8 --modes together --option copy_streams=1
tp_round t8_lws 25 build-main $D --sizes 8 --modes together --no-local-world-size
log end; pack
cat $OUT/summary.txt
