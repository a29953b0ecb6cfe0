# Session 24, call B (~5 min): why "together" falls short at n = 8 and 4.
# In call A (an H100) a rank's prepare registered its 1.42 GB of pages in
# 183-660 ms when eight ranks did so at once, past the 0.2 s before the
# barrier, and ranks 0 and 7 ended 30-50 ms before the others (as in
# session 23's call D). Together at n = 8 with 0.2 s (as before), 1.0 s
# (registration done before the clock?) and host_register=off (nothing
# registered), n = 4 with 1.0 s; then the table with the peers.
TAG=s24b; DEADLINE=${DEADLINE:-330}
. bench/device_preamble.sh
build_tree . build-main main
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/gpu.txt 2>&1
D=/var/tmp/wl_llama2-7b
synth_cached build-main $D
python3 -m compileall -q build-main/python/weightlift > /dev/null 2>&1
log "synth + page cache done"
tp_round t8_02 40 build-main $D --sizes 8 --modes together
tp_round t8_10 40 build-main $D --sizes 8 --modes together --construct-seconds 1.0
tp_round t8_off 40 build-main $D --sizes 8 --modes together --option host_register=off
tp_round t4_10 40 build-main $D --sizes 4 --modes together --construct-seconds 1.0
tp_round tp 130 build-main $D --sizes 2,4,8 --modes alone,together,peers
log end; pack
cat $OUT/summary.txt
