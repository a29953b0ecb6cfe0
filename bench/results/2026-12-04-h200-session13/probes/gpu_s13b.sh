# session 13, call B (~4 min, branch s13-probe): where a row-run chunk's
# time goes inside the loader (WL_PROBE_TIME: workers' thread time in
# acquire / read / deliver, row-run chunks against the others), and how
# the row is written (non-temporal, rep movsb, via a bounce buffer) or a
# mapping kept across calls (rows_env.py SET=store).
TAG=s13b; DEADLINE=${DEADLINE:-330}
. bench/device_preamble.sh
build_tree . build-main main
D=/var/tmp/wl_llama2-7b
mkdir -p $D; [ -f $D/model.safetensors.index.json ] || build-main/weightlift synth --layout llama2-7b --shards 2 $D > $OUT/synth.log 2>&1; cat $D/*.safetensors > /dev/null
log "build + synth done"; pack
python3 -m compileall -q build-main/python/weightlift > /dev/null 2>&1
P=bench/results/2026-12-04-h200-session13/probes
fits 60 && { WL_PROBE_TIME=1 PYTHONPATH=build-main/python timeout 60 python3 bench/interleaved.py $D --rounds 3 --config whole --config "r8 rowwise" tp_rank=0 tp_size=8 tp_plan=rowwise --config "r8 colwise" tp_rank=0 tp_size=8 tp_plan=colwise --config "r8 llama" tp_rank=0 tp_size=8 tp_plan=llama > $OUT/probe_time.log 2>&1; log "probe_time rc $?"; cat $OUT/probe_time.log >> $OUT/summary.txt; pack; }
fits 70 && { SET=store PYTHONPATH=build-main/python timeout 70 python3 $P/rows_env.py $D 5 > $OUT/rows_store.log 2>&1; log "rows_store rc $?"; cat $OUT/rows_store.log >> $OUT/summary.txt; pack; }
log end; pack
cat $OUT/summary.txt
