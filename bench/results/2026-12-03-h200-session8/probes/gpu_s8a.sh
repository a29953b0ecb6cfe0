# session 8, call A (exploration, ~4 min): what pinning the staging ring
# costs by method, what a TP rank's row runs cost by read method, and where
# a fresh process's first call goes (full load and TP n=8/4). Logs in
# $OUT/s8a.tgz.
T0=$(date +%s); DEADLINE=${DEADLINE:-330}
RET=$OUT; export OUT=/tmp/o8a; rm -rf $OUT; mkdir -p $OUT
export PYTHONUNBUFFERED=1
P=bench/results/2026-12-03-h200-session8/probes
pack() { tar czf $RET/s8a.tgz -C $OUT . ; }
el() { echo $(( $(date +%s) - T0 )); }
fits() { [ $(( $(el) + $1 )) -le $DEADLINE ]; }
log() { echo "[$(el) s] $*" | tee -a $OUT/summary.txt; }
git log -1 --format=%h > $OUT/commit.txt 2>/dev/null; cat .probe/commit.txt >> $OUT/commit.txt
( uname -a; nproc; numactl -H 2>/dev/null | head -3; cat /sys/kernel/mm/transparent_hugepage/enabled; cat /proc/sys/vm/max_map_count; free -g ) > $OUT/machine.txt 2>&1
( nvcc -O2 -std=c++20 $P/pin_probe.cc -o /tmp/pin_probe -lpthread && g++ -O2 -std=c++20 -pthread $P/rows_probe2.cc -I.deps/include .deps/lib/liburing.a -o /tmp/rows_probe2 ) > $OUT/probe_build.log 2>&1 &
PB=$!
timeout 100 bash bench/h200_run.sh build > $OUT/build_stage.log 2>&1; log "build rc $?"
wait $PB; log "probes built rc $?"; pack
WL=build-gpu/weightlift; D=/var/tmp/wl_llama2-7b
( mkdir -p $D; $WL synth --layout llama2-7b --shards 2 $D > $OUT/synth.log 2>&1; cat $D/*.safetensors > /dev/null; echo done >> $OUT/synth.log ) &
SYN=$!
timeout 60 /tmp/pin_probe > $OUT/pin_probe.log 2>&1; log "pin_probe rc $?"; pack
wait $SYN; log "synth done"
F=$D/model-00001-of-00002.safetensors
for t in 16 8; do timeout 60 /tmp/rows_probe2 $F $t >> $OUT/rows_probe2.log 2>&1; log "rows_probe2 $t rc $?"; done; pack
export PYTHONPATH=build-gpu/python
for m in full tp8 tp4; do
  fits 20 && { timeout 30 python3 $P/first_profile.py $D $m > $OUT/first_$m.log 2>&1; log "first $m rc $? $(grep -m1 'call 0' $OUT/first_$m.log)"; pack; }
  fits 20 && { timeout 30 python3 $P/first_profile.py $D $m profile > $OUT/first_${m}_profile.log 2>&1; log "profile $m rc $?"; pack; }
done
fits 25 && { timeout 30 python3 bench/first_call.py $D --later free,keep > $OUT/first_call.log 2>&1; log "first_call rc $? $(grep -m1 'call 1' $OUT/first_call.log)"; pack; }
log end; pack
cat $OUT/summary.txt
