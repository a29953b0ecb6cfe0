# Session 24, call B (~5 min, wanted on an H200; call A got an H100):
# issue 11's table with the peers, then a second round of alone and
# together, on the code of call A (the files opened side by side,
# residency sampled in 64 KiB windows).
TAG=s24b; DEADLINE=${DEADLINE:-330}
. bench/device_preamble.sh
build_tree . build-main main
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/gpu.txt 2>&1
D=/var/tmp/wl_llama2-7b
synth_cached build-main $D
python3 -m compileall -q build-main/python/weightlift > /dev/null 2>&1
log "synth + page cache done"
tp_round tp 130 build-main $D --sizes 2,4,8 --modes alone,together,peers
tp_round tp2 110 build-main $D --sizes 2,4,8 --modes alone,together
log end; pack
cat $OUT/summary.txt
