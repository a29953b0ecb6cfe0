# session 13, call C (~3 min, branch s13-probe): each worker's timeline in
# RunPlan (entered, first chunk, last chunk, drained) for a whole load and
# rank 0 of 8 under three plans, later calls interleaved (WL_PROBE_TIME).
TAG=s13c; DEADLINE=${DEADLINE:-240}
. bench/device_preamble.sh
build_tree . build-main main
D=/var/tmp/wl_llama2-7b
mkdir -p $D; [ -f $D/model.safetensors.index.json ] || build-main/weightlift synth --layout llama2-7b --shards 2 $D > $OUT/synth.log 2>&1; cat $D/*.safetensors > /dev/null
log "build + synth done"; pack
python3 -m compileall -q build-main/python/weightlift > /dev/null 2>&1
fits 60 && { WL_PROBE_TIME=1 PYTHONPATH=build-main/python timeout 60 python3 bench/interleaved.py $D --rounds 2 --config whole --config "r8 rowwise" tp_rank=0 tp_size=8 tp_plan=rowwise --config "r8 colwise" tp_rank=0 tp_size=8 tp_plan=colwise --config "r8 llama" tp_rank=0 tp_size=8 tp_plan=llama > $OUT/probe_timeline.log 2>&1; log "probe_timeline rc $?"; cat $OUT/probe_timeline.log >> $OUT/summary.txt; pack; }
fits 30 && { WL_PROBE_TIME=1 PYTHONPATH=build-main/python timeout 30 python3 bench/tp_phases.py --ckpt $D --n 8 --calls 2 > $OUT/tp_phases_8.log 2>&1; log "tp_phases rc $?"; cut -c1-600 $OUT/tp_phases_8.log | grep -v "file:" >> $OUT/summary.txt; pack; }
log end; pack
cat $OUT/summary.txt
