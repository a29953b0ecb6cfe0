# session 10, call F (~2 min, the session's last device time): main with the
# new staging thread default (12 workers, a 96 MiB ring on 16 cores): two
# fresh-process first calls, TP ranks alone n=2,4.
TAG=s10f; DEADLINE=${DEADLINE:-120}
. bench/device_preamble.sh
build_tree . build-main main
D=/var/tmp/wl_llama2-7b
mkdir -p $D; [ -f $D/model.safetensors.index.json ] || build-main/weightlift synth --layout llama2-7b --shards 2 $D > $OUT/synth.log 2>&1; cat $D/*.safetensors > /dev/null
log "build + synth done"; pack
python3 -m compileall -q build-main/python/weightlift > /dev/null 2>&1
for r in 1 2; do
  fits 12 && { PYTHONPATH=build-main/python timeout 20 python3 bench/first_call.py $D --later free,keep > $OUT/first_main_$r.log 2>&1; log "first main $r rc $? $(grep -m1 'call 1' $OUT/first_main_$r.log | cut -c1-100)"; pack; }
done
fits 20 && { PYTHONPATH=build-main/python timeout 25 python3 bench/tp_bench.py --ckpt $D --sizes 2,4 --modes alone --no-verify --device cuda:0 > $OUT/tp_alone_main.log 2>&1; log "tp alone rc $?"; grep -E "^n=" $OUT/tp_alone_main.log | sed 's/(goal.*//' >> $OUT/summary.txt; }
log end; pack
cat $OUT/summary.txt
