# session 14, call A (~5 min, branch s14-probe: timeline marks in the C++
# load and in the Python TP path, printed with WL_PROBE_TL=1): where a TP
# rank's first call goes at n = 8 and 4, fresh against a loader made
# beforehand; the whole checkpoint's first call for comparison.
TAG=s14a; DEADLINE=${DEADLINE:-420}
. bench/device_preamble.sh
build_tree . build-main main
D=/var/tmp/wl_llama2-7b
mkdir -p $D; [ -f $D/model.safetensors.index.json ] || build-main/weightlift synth --layout llama2-7b --shards 2 $D > $OUT/synth.log 2>&1; cat $D/*.safetensors > /dev/null
log "build + synth done"; pack
python3 -m compileall -q build-main/python/weightlift > /dev/null 2>&1
P=bench/results/2026-12-04-h200-session14/probes
for round in 1 2 3; do
  for n in 8 4; do
    for mode in fresh prepared; do
      fits 15 && { WL_PROBE_TL=1 PYTHONPATH=build-main/python timeout 15 python3 $P/prepared_first.py $D $n $mode > $OUT/pf_${n}_${mode}_$round.log 2>&1; log "pf $n $mode $round rc $? $(grep -m1 'call 0' $OUT/pf_${n}_${mode}_$round.log | cut -c1-90)"; pack; }
    done
  done
done
fits 30 && { PYTHONPATH=build-main/python timeout 30 python3 bench/tp_phases.py --ckpt $D --n 8 --calls 3 > $OUT/tp_phases_8.log 2>&1; log "tp_phases 8 rc $?"; pack; }
log end; pack
cat $OUT/summary.txt
