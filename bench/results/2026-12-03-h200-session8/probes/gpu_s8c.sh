# session 8, call C (~5 min): A/B/C in one run, interleaved. old = main
# before session 8 (b2b1d3a); waves = the staging ring pinned in waves,
# row runs as before; new = waves + row runs from one whole-file mapping
# (c8a0ef4). Sources of old and waves travel in .ab/. Logs in $OUT/s8c.tgz.
T0=$(date +%s); DEADLINE=${DEADLINE:-540}
RET=$OUT; export OUT=/tmp/o8c; rm -rf $OUT; mkdir -p $OUT
export PYTHONUNBUFFERED=1
pack() { tar czf $RET/s8c.tgz -C $OUT . ; }
el() { echo $(( $(date +%s) - T0 )); }
fits() { [ $(( $(el) + $1 )) -le $DEADLINE ]; }
log() { echo "[$(el) s] $*" | tee -a $OUT/summary.txt; }
cat .probe/commit.txt > $OUT/commit.txt
ROOT=$PWD
b() { cmake -S $1 -B $2 -G Ninja -DCMAKE_BUILD_TYPE=Release -DWL_BUILD_PYTHON=ON -DPython_EXECUTABLE=$(command -v python3) -DCMAKE_PREFIX_PATH=$ROOT/.deps > $OUT/build_$3.log 2>&1 && ninja -C $2 -j6 weightlift_cli weightlift_python >> $OUT/build_$3.log 2>&1; echo "build $3 rc $?" >> $OUT/summary.txt; }
b . build-new new & b .ab/old build-old old & b .ab/waves build-waves waves & wait
log "builds done"; cat $OUT/summary.txt; pack
WL=build-new/weightlift; [ -x $WL ] || WL=build-old/weightlift
D=/var/tmp/wl_llama2-7b
mkdir -p $D; [ -f $D/model.safetensors.index.json ] || $WL synth --layout llama2-7b --shards 2 $D > $OUT/synth.log 2>&1; cat $D/*.safetensors > /dev/null
log "synth done"
for r in 1 2; do
  for v in old waves new; do
    fits 15 && { PYTHONPATH=build-$v/python timeout 20 python3 bench/first_call.py $D --later free,free > $OUT/first_${v}_$r.log 2>&1; log "first $v $r rc $? $(grep -m1 'call 1' $OUT/first_${v}_$r.log | cut -c1-120)"; }
  done; pack
done
for r in 1 2; do
  for v in old waves new; do
    fits 25 && { PYTHONPATH=build-$v/python timeout 30 python3 bench/tp_bench.py --ckpt $D --sizes 8,4,2 --modes together --no-verify --device cuda:0 > $OUT/together_${v}_$r.log 2>&1; log "together $v $r rc $?"; grep -E "^n=" $OUT/together_${v}_$r.log | sed 's/each rank alone.*together/together/; s/(goal.*//' >> $OUT/summary.txt; }
  done; pack
done
for v in old new; do
  fits 10 && { PYTHONPATH=build-$v/python timeout 15 python3 bench/tp_phases.py --ckpt $D --n 8 --calls 3 > $OUT/tp_phases8_$v.log 2>&1; log "tp_phases 8 $v rc $?"; grep -E "call [0-9]" $OUT/tp_phases8_$v.log | cut -c1-140 >> $OUT/summary.txt; }
done
log end; pack
cat $OUT/summary.txt
