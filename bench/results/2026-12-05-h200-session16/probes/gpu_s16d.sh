# session 16, call D (~3 min, main): what a group load's batches cost on the
# H200 (probes/group_batches.py: an NCCL group of one, batch 4 GiB .. 64 MiB,
# against the plain load).
TAG=s16d; DEADLINE=${DEADLINE:-250}
. bench/device_preamble.sh
[ -x build-main/weightlift ] || build_tree . build-main main
D=/var/tmp/wl_llama2-7b
mkdir -p $D; [ -f $D/model.safetensors.index.json ] || build-main/weightlift synth --layout llama2-7b --shards 2 $D > $OUT/synth.log 2>&1; cat $D/*.safetensors > /dev/null
log "build + synth done"; pack
fits 120 && { PYTHONPATH=build-main/python timeout 150 python3 bench/results/2026-12-05-h200-session16/probes/group_batches.py $D > $OUT/group_batches.log 2>&1; log "group batches rc $?"; cat $OUT/group_batches.log >> $OUT/summary.txt; pack; }
log end; pack
cat $OUT/summary.txt
